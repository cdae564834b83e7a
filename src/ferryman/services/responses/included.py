"""What a reader sees of stored items: some parts are always kept but shown only when ``include`` asks.

A ``file_search_call`` keeps the passages its search found, so that a later
response in the conversation gives the model what it read (``hosted/replay.py``).
OpenAI shows them only to a request whose ``include`` names
``file_search_call.results``: the response returned or streamed to the request
that created it, ``GET /v1/responses/{id}``, and the listings of input and
conversation items each hide them unless that request asks. The stored records
and events stay whole; hiding happens as they are read.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any, TypeVar

from ferryman.api.responses import (
    FILE_SEARCH_RESULTS,
    ConversationList,
    Item,
    ItemList,
    ListedResponse,
    Response,
    ResponseList,
)
from ferryman.errors import error_for_code
from ferryman.storage.base import StoredEvent

OPTIONAL_FIELDS: dict[str, tuple[str, str]] = {
    "file_search_call": (FILE_SEARCH_RESULTS, "results"),
}
"""By item type: the ``include`` value that shows a field, and the field (null when hidden)."""

_R = TypeVar("_R", Response, ListedResponse)


def _hidden(include: frozenset[str]) -> dict[str, str]:
    """The fields to hide, by item type, for a reader asking for ``include``."""
    return {kind: name for kind, (value, name) in OPTIONAL_FIELDS.items() if value not in include}


def shown_items(items: list[Item], include: Iterable[str] | None) -> list[Item]:
    """The items as a reader asking for ``include`` sees them."""
    hidden = _hidden(frozenset(include or ()))
    return [_shown(item, hidden) for item in items]


def _shown(item: Item, hidden: dict[str, str]) -> Item:
    name = hidden.get(item.type)
    if name is None or getattr(item, name, None) is None:
        return item
    return item.model_copy(update={name: None})


def shown_response(response: _R, include: Iterable[str] | None) -> _R:
    """The response as a reader asking for ``include`` sees it (its output, and a listing's input)."""
    update: dict[str, Any] = {"output": shown_items(response.output, include)}
    if isinstance(response, ListedResponse):
        update["input"] = shown_items(response.input, include)
    return response.model_copy(update=update)


def ended_answer(response: Response, include: Iterable[str] | None) -> Response:
    """What a create that did not stream answers once its run ended: the response as its reader sees it.

    Raises:
        FerrymanError: the run failed (its error, by its code).
    """
    if response.status == "failed" and response.error is not None:
        raise error_for_code(response.error.code, f"response {response.id} failed: {response.error.message}")
    return shown_response(response, include)


async def shown_events(events: AsyncIterator[StoredEvent], include: Iterable[str] | None) -> AsyncIterator[StoredEvent]:
    """A response's stream events as a reader asking for ``include`` sees them."""
    hidden = _hidden(frozenset(include or ()))
    async for event in events:
        yield _shown_event(event, hidden) if hidden else event


def _shown_event(event: StoredEvent, hidden: dict[str, str]) -> StoredEvent:
    """An event with the hidden fields of the items it holds (``item``, or its response's ``output``) nulled."""
    # Only an item holding a hidden field costs a parse; most events hold none.
    if not any(f'"{name}":[' in event.data for name in hidden.values()):
        return event
    data = json.loads(event.data)
    items = [data.get("item"), *((data.get("response") or {}).get("output") or [])]
    changed = False
    for item in items:
        name = hidden.get(str(item.get("type"))) if isinstance(item, dict) else None
        if name is not None and item.get(name) is not None:
            item[name], changed = None, True
    if not changed:
        return event
    return StoredEvent(event.seq, json.dumps(data, ensure_ascii=False, separators=(",", ":")))


Listing = TypeVar("Listing", ItemList, ResponseList, ConversationList)


def listed(kind: type[Listing], items: list[Any], has_more: bool = False) -> Listing:
    """Items as OpenAI's list object: the items, the first and last ids, and whether more follow."""
    ids = [item.id for item in items]
    return kind(data=items, first_id=ids[0] if ids else None, last_id=ids[-1] if ids else None, has_more=has_more)
