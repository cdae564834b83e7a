"""``POST /v1/responses/compact`` and the ``compaction`` items it makes: a summary sealed by the server.

The item's ``encrypted_content`` is the summary (with a version) under AES-256-GCM with the server's key
(``context.secret``, see :mod:`ferryman.context_settings`): a client can neither read it nor forge one the
server would read. Given back in an input, the item is opened (:meth:`Sealer.opened`) and the model reads the
summary in its place (``items.compacted_message``).

The summary is made from the history as shields left it: a blocked input stands in it as its placeholder.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
import uuid

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ferryman.api.responses import CompactedResponse, CompactionItem, Item, MessageItem, Usage
from ferryman.errors import ConfigurationError, InvalidRequestError
from ferryman.storage.domain.server_secrets import generated_secret
from ferryman.storage.kernel.protocol import Kernel

from .ids import new_item_id

_VERSION = 1
_AAD = b"ferryman compaction v1"
KEY_NAME = "compaction"
"""The name of the generated key's ``server_secret`` record (when ``context.secret`` is unset)."""


class Sealer:
    """Seals summaries into ``encrypted_content`` and opens them again (authenticated: a changed byte fails).

    Args:
        key: 32 bytes (``ContextSettings.key``).
    """

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def seal(self, summary: str) -> str:
        """The ``encrypted_content`` of a summary."""
        nonce = os.urandom(12)
        body = json.dumps({"v": _VERSION, "summary": summary}).encode()
        return base64.urlsafe_b64encode(nonce + self._aead.encrypt(nonce, body, _AAD)).decode()

    def open(self, sealed: str) -> str:
        """The summary a ``encrypted_content`` holds.

        Raises:
            InvalidRequestError: it was not made by this server's key, or was changed.
        """
        try:
            raw = base64.urlsafe_b64decode(sealed.encode())
            body = json.loads(self._aead.decrypt(raw[:12], raw[12:], _AAD))
            summary = body["summary"]
            if body.get("v") != _VERSION or not isinstance(summary, str):
                raise ValueError("unknown version")
        except (InvalidTag, ValueError, KeyError, TypeError) as exc:
            raise InvalidRequestError(
                "a compaction item's encrypted_content was not made by this server (or was changed)", "input"
            ) from exc
        return summary

    def opened(self, items: list[Item]) -> list[Item]:
        """The items with each ``compaction`` item opened (the model reads its summary in its place)."""
        return [
            item.opened(self.open(item.encrypted_content)) if isinstance(item, CompactionItem) else item
            for item in items
        ]


class Sealing:
    """The server's :class:`Sealer`, made on first use: from ``context.secret``, else from the key generated
    once into the store (so that every replica opens what any replica sealed).

    Args:
        key: The key ``context.secret`` gives (None: unset).
        kernel: The store's kernel, holding the generated key.
    """

    def __init__(self, key: bytes | None, kernel: Kernel) -> None:
        self._key, self._kernel = key, kernel
        self._sealer: Sealer | None = None

    async def sealer(self) -> Sealer:
        """The sealer (the generated key is read, or written, the first time).

        Raises:
            ConfigurationError: the stored key is not 32 bytes in hex.
        """
        if self._sealer is None:
            self._sealer = Sealer(self._key if self._key is not None else await self._stored_key())
        return self._sealer

    async def opened(self, items: list[Item]) -> list[Item]:
        """:meth:`Sealer.opened`; a list without ``compaction`` items needs no key (nor its first read)."""
        if not any(isinstance(item, CompactionItem) for item in items):
            return items
        return (await self.sealer()).opened(items)

    async def seal(self, summary: str) -> str:
        """:meth:`Sealer.seal`."""
        return (await self.sealer()).seal(summary)

    async def _stored_key(self) -> bytes:
        text = await generated_secret(self._kernel, KEY_NAME, lambda: secrets.token_bytes(32).hex())
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise ConfigurationError("the stored compaction key is not 32 bytes in hex: set context.secret")
        return key


def user_messages(items: list[Item]) -> list[Item]:
    """The user message items of a conversation, in order (what a compacted conversation keeps as they were)."""
    return [item for item in items if isinstance(item, MessageItem) and item.role == "user"]


def compacted(kept: list[Item], sealed: str, usage: Usage) -> CompactedResponse:
    """The answer of ``POST /v1/responses/compact``: the kept user messages, then the compaction item."""
    item = CompactionItem(id=new_item_id("compaction"), encrypted_content=sealed)
    return CompactedResponse(
        id=f"resp_{uuid.uuid4().hex}", created_at=int(time.time()), output=[*kept, item], usage=usage
    )
