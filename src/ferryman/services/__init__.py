"""Application services: the operations of each API, over the engine and storage, with no HTTP."""
