"""Server-side tools and the registry that resolves an agent's toolgroups."""
