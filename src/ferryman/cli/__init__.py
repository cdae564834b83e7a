"""The ``ferryman`` command."""
