"""The HTTP layer: thin routers over the services."""
