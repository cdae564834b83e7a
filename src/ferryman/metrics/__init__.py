"""Prometheus metrics: what the server records (:mod:`.instruments`) and how several processes share them."""
