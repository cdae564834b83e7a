"""Test doubles for the model, shipped with ferryman so that tests of any project can use them.

:class:`ScriptedModel` is an in-process inference provider; ``python -m
ferryman.testing.server`` serves the same scripts over an OpenAI-compatible
HTTP API, and :class:`ScriptedServerClient` enqueues into it. Neither is ever
a default: a server only uses them when told to.
"""

from .scripted import Script, ScriptedError, ScriptedModel, ScriptedReply, ScriptedToolCall, ScriptMismatchError
from .server_client import ScriptedServerClient

__all__ = [
    "Script",
    "ScriptMismatchError",
    "ScriptedError",
    "ScriptedModel",
    "ScriptedReply",
    "ScriptedServerClient",
    "ScriptedToolCall",
]
