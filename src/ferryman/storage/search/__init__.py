"""In-process search indexes of chunks: BM25 keywords and vectors, kept current from each store's feed of changes."""
