"""Input and output shields."""
