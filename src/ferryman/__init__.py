"""Ferryman: a self-hosted, durable agent server."""

__version__ = "0.1.0"
