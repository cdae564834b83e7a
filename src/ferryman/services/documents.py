"""Turning a turn's documents into text the model reads with the user's message."""

from __future__ import annotations

import asyncio
import base64
import binascii
from urllib.parse import unquote

from ferryman.api.agents import Document
from ferryman.api.content import URL, TurnInputMessage, content_to_text
from ferryman.api.limits import MAX_DOCUMENTS
from ferryman.engine.memory import with_context
from ferryman.errors import InvalidRequestError
from ferryman.logs import redacted_url
from ferryman.safe_fetch import FetchPolicy, fetch


async def document_text(document: Document, policy: FetchPolicy) -> str:
    """The text of a document: inline content, a ``data:`` URL, or an http(s) URL fetched once within ``policy``."""
    content = document.content
    if isinstance(content, URL):
        return await _url_text(content.uri, policy)
    return content_to_text(content)


async def _url_text(uri: str, policy: FetchPolicy) -> str:
    if uri.startswith("data:"):
        return _data_url_text(uri, policy.max_bytes)
    if uri.startswith(("http://", "https://")):
        return (await fetch(uri, policy, "documents")).decode("utf-8", errors="replace")
    raise InvalidRequestError(f"unsupported document URL scheme: {redacted_url(uri)}", "documents")


def _data_url_text(uri: str, max_bytes: int) -> str:
    header, _, payload = uri.partition(",")
    try:
        raw = base64.b64decode(payload, validate=True) if header.endswith(";base64") else unquote(payload).encode()
    except binascii.Error as exc:
        raise InvalidRequestError("document data URL is not valid base64", "documents") from exc
    if len(raw) > max_bytes:
        raise InvalidRequestError(f"a document data URL is larger than {max_bytes} bytes", "documents")
    return raw.decode("utf-8", errors="replace")


async def document_texts(documents: list[Document], policy: FetchPolicy) -> list[str]:
    """The text of each document; URLs are fetched within ``policy``, all of them within its time budget."""
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidRequestError(f"at most {MAX_DOCUMENTS} documents may come in one request", "documents")
    try:
        async with asyncio.timeout(policy.timeout_seconds):
            return [await document_text(document, policy) for document in documents]
    except TimeoutError as exc:
        too_slow = f"fetching the documents took longer than {policy.timeout_seconds:g} s"
        raise InvalidRequestError(too_slow, "documents") from exc


def attach_documents(
    messages: list[TurnInputMessage], documents: list[Document], texts: list[str]
) -> list[TurnInputMessage]:
    """Attach the documents' text as context of the last user message (the caller checked there is one)."""
    block = "\n\n".join(
        f"[document {i + 1} ({d.mime_type})]\n{t}" for i, (d, t) in enumerate(zip(documents, texts, strict=True))
    )
    return with_context(messages, block)
