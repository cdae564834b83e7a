"""Inference providers and the router that picks one per model."""
