"""Knowledge: files, vector stores, ingestion and retrieval, under both APIs."""
