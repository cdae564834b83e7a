"""The commands the server's distribution adds to ``ferryman``: ``serve``, ``stop``, ``keys``, ``models pull|pulled``,
``webhooks secret``.

Each is a :class:`~ferryman.cli.commands.Command`, declared as an entry point of the
``ferryman.commands`` group in the server's ``pyproject.toml``: ``ferryman --help`` reads
these lines without importing the modules named, which load the server's code.
"""

from __future__ import annotations

from ferryman.cli.commands import Command

SERVE = Command("run the HTTP server (in the background with --detach)", "ferryman.cli.serve")
STOP = Command("stop the server 'ferryman serve --detach' started (SIGTERM, then wait)", "ferryman.cli.detach")
KEYS = Command("manage API keys (create, list, revoke)", "ferryman.cli.keys")
MODELS_PULL = Command(
    "download a GGUF from the Hugging Face Hub and serve it as an embedded model (no server needed)",
    "ferryman.cli.models_pull",
    "add_pull",
)
MODELS_PULLED = Command("list the pulled models (no server needed)", "ferryman.cli.models_pull", "add_pulled")
WEBHOOKS_SECRET = Command(
    "print the secret webhook events are signed with (no server needed)", "ferryman.cli.webhook_secret", "add_secret"
)
