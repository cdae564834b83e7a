"""Records written once, above the storage kernel: every backend stores them through the same code."""
