"""Durable state behind small protocols, one implementation per backend."""
