"""The ``compaction`` items: a compacted conversation, sealed by the server.

``POST /v1/responses/compact`` makes one of a summary; a response whose prompt crossed its ``compact_threshold``
puts one in its output, of all the model read from then on (the engine's summary first, see
:class:`~ferryman.engine.events.HistoryCompacted`): given back (in an input, or in a conversation), it stands
in for every item before it (``items.py``), so that none of what it replaced reaches the model again.

The item's ``encrypted_content`` is its content (with a version) under AES-256-GCM with the server's key
(``context.secret``, see :mod:`ferryman.context_settings`): a client can neither read it nor forge one the
server would read. Given back in an input, the item is opened (:meth:`Sealer.opened`) and the model reads
its content in its place.

The summary is made from the history as shields left it: a blocked input stands in it as its placeholder.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from ferryman.api.content import Message, content_to_text
from ferryman.api.limits import MAX_MESSAGE_CHARS
from ferryman.api.responses import CompactedResponse, CompactionItem, Item, MessageItem, Usage
from ferryman.errors import ConfigurationError, InvalidRequestError
from ferryman.ids import new_id
from ferryman.storage.domain.server_secrets import generated_secret
from ferryman.storage.kernel.protocol import Kernel

from .ids import new_item_id
from .items import COMPACTED_HEADER

_VERSION = 1
_AAD = b"ferryman compaction v1"
KEY_NAME = "compaction"
"""The name of the generated key's ``server_secret`` record (when ``context.secret`` is unset)."""
_HISTORY: TypeAdapter[list[Message]] = TypeAdapter(list[Message])

log = logging.getLogger(__name__)

HistoryItems = Callable[[list[Message]], CompactionItem | None]
"""Makes the ``compaction`` item of a response's compacted history (None: too long for one)."""
Reseal = Callable[[CompactionItem, list[Message]], CompactionItem]
"""Seals an opened ``compaction`` item over other messages (:meth:`Sealer.resealed`)."""
Unread = tuple[str | None, str]
"""The ids of the last conversation item a response read (None: none) and of the first item it added."""


@dataclass
class ConversationRead:
    """Where a response's read of its conversation ends, sealed into its ``compaction`` item.

    A response reads the conversation when it starts (a queued one: when its turn comes, which moves
    ``last_read``), and stores its own items there, from ``first_added`` on, when it ends. What a client adds
    meanwhile is stored between the two, before the ``compaction`` item, yet no summary of the response saw it:
    sealed with the item, the two ids tell a later reader which items those are (``items.py`` reads them after
    it).

    Attributes:
        last_read: The id of the last item of the conversation the response read (None: it was empty).
        first_added: The id of the first item the response adds to the conversation (its input's first).
    """

    last_read: str | None
    first_added: str

    def bounds(self) -> Unread:
        """The two ids, as they are sealed."""
        return self.last_read, self.first_added


class Sealer:
    """Seals summaries into ``encrypted_content`` and opens them again (authenticated: a changed byte fails).

    Args:
        key: 32 bytes (``ContextSettings.key``).
    """

    def __init__(self, key: bytes) -> None:
        # cryptography (7 MiB) loads with the first sealer (made on first use), not with the server.
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)

    def seal(self, summary: str) -> str:
        """The ``encrypted_content`` of a summary."""
        return self._seal({"v": _VERSION, "summary": summary})

    def history_item(self, history: list[Message], unread: Unread | None = None) -> CompactionItem | None:
        """The item of a response's compacted history (None, logged, when it is too long for one); in a
        conversation, with the bounds of what its response did not read (:class:`ConversationRead`)."""
        sealed = self._seal_history(history, unread)
        if len(sealed) > MAX_MESSAGE_CHARS:
            log.warning("a compacted history of %d characters sealed is too long for a compaction item", len(sealed))
            return None
        return CompactionItem(id=new_item_id("compaction"), encrypted_content=sealed)

    def resealed(self, item: CompactionItem, messages: list[Message]) -> CompactionItem:
        """An opened item sealing ``messages`` instead: what it became for the model, as an input shield
        redacted them (see ``redaction.py``); it keeps its id.

        A response's item seals them as its history; a ``compact`` call's its one message's text, as its
        summary. Sealed too long for an item (a redaction may lengthen the text), it seals nothing instead
        (an empty history, which still replaces every item before it; an empty summary): never the text as sent.
        """
        if item.history is not None:
            sealed = self._seal_history(messages, item.unread)
            if len(sealed) > MAX_MESSAGE_CHARS:
                messages, sealed = [], self._seal_history([], item.unread)
            return item.model_copy(update={"encrypted_content": sealed}).opened(history=messages, unread=item.unread)
        summary = _summary_of(messages)
        sealed = self.seal(summary)
        if len(sealed) > MAX_MESSAGE_CHARS:
            summary, sealed = "", self.seal("")
        return item.model_copy(update={"encrypted_content": sealed}).opened(summary=summary)

    def _seal_history(self, history: list[Message], unread: Unread | None) -> str:
        body: dict[str, Any] = {"v": _VERSION, "history": _HISTORY.dump_python(history, mode="json")}
        if unread is not None:  # absent from items sealed before it was: they read as without bounds
            body["unread"] = list(unread)
        return self._seal(body)

    def _seal(self, body: dict[str, Any]) -> str:
        nonce = os.urandom(12)
        return base64.urlsafe_b64encode(nonce + self._aead.encrypt(nonce, json.dumps(body).encode(), _AAD)).decode()

    def open(self, sealed: str) -> str | list[Message]:
        """What an ``encrypted_content`` holds: a ``compact`` call's summary, or a response's history.

        Raises:
            InvalidRequestError: it was not made by this server's key, or was changed.
        """
        return self._contents(sealed)[0]

    def _contents(self, sealed: str) -> tuple[str | list[Message], Unread | None]:
        """What :meth:`open` gives, and a response's item's bounds of what it did not read (if sealed)."""
        from cryptography.exceptions import InvalidTag

        try:
            raw = base64.urlsafe_b64decode(sealed.encode())
            body = json.loads(self._aead.decrypt(raw[:12], raw[12:], _AAD))
            if body.get("v") != _VERSION:
                raise ValueError("unknown version")
            if "history" in body:
                return _HISTORY.validate_python(body["history"]), _unread(body.get("unread"))
            summary = body["summary"]
            if not isinstance(summary, str):
                raise ValueError("no summary")
        except (InvalidTag, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidRequestError(
                "a compaction item's encrypted_content was not made by this server (or was changed)", "input"
            ) from exc
        return summary, None

    def opened(self, items: list[Item]) -> list[Item]:
        """The items with each ``compaction`` item opened (the model reads what it holds in its place)."""
        return [self._opened(item) if isinstance(item, CompactionItem) else item for item in items]

    def _opened(self, item: CompactionItem) -> CompactionItem:
        content, unread = self._contents(item.encrypted_content)
        if isinstance(content, str):
            return item.opened(summary=content)
        return item.opened(history=content, unread=unread)


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

    async def history_items(self, strategy: str, read: ConversationRead | None = None) -> HistoryItems | None:
        """What makes the items of a response whose context strategy is ``strategy`` (None: it compacts nothing);
        ``read``: where its read of its conversation ends, as it stands when it compacts (None: it has none)."""
        if strategy != "compaction":
            return None
        sealer = await self.sealer()
        return lambda history: sealer.history_item(history, read.bounds() if read is not None else None)

    async def _stored_key(self) -> bytes:
        text = await generated_secret(self._kernel, KEY_NAME, lambda: secrets.token_bytes(32).hex())
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise ConfigurationError("the stored compaction key is not 32 bytes in hex: set context.secret")
        return key


def _unread(sealed: Any) -> Unread | None:
    """The bounds a response's item sealed (None: it sealed none).

    Raises:
        ValueError: they are not two ids.
    """
    if sealed is None:
        return None
    last, first = sealed  # a ValueError if not two
    if not isinstance(first, str) or not (last is None or isinstance(last, str)):
        raise ValueError("malformed unread bounds")
    return last, first


def _summary_of(messages: list[Message]) -> str:
    """The summary a ``compact`` call's item became the message of (``items.compacted_message``)."""
    text = "".join(content_to_text(message.content) for message in messages)
    header = f"{COMPACTED_HEADER}\n"
    return text.removeprefix(header)


def user_messages(items: list[Item]) -> list[Item]:
    """The user message items of a conversation, in order (what a compacted conversation keeps as they were)."""
    return [item for item in items if isinstance(item, MessageItem) and item.role == "user"]


def compacted(kept: list[Item], sealed: str, usage: Usage) -> CompactedResponse:
    """The answer of ``POST /v1/responses/compact``: the kept user messages, then the compaction item."""
    item = CompactionItem(id=new_item_id("compaction"), encrypted_content=sealed)
    return CompactedResponse(id=new_id("resp"), created_at=int(time.time()), output=[*kept, item], usage=usage)
