"""The wire contract: pydantic models of every body ferryman reads or writes.

This package imports nothing else of ferryman's, so any layer may depend on it.
"""
