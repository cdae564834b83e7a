"""The Responses API's hosted tools: ``file_search``, ``mcp``, ``code_interpreter`` and ``web_search``."""
