"""The resources of ``Client`` and ``AsyncClient``: one module per family of routes."""
