"""Lists that fetch their next page only when iteration reaches it.

Ferryman pages two ways: the Agents API by position (``start_index`` and ``limit``, with
``has_more``), the OpenAI-shaped APIs by cursor (``after`` the ``last_id`` of the page). A
:data:`PageReader` turns one answer into its items and the request of the next page; the
sync and async pages only fetch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

import httpx
from pydantic import TypeAdapter

from ferryman.api.agents import PaginatedResponse

from ._transport import AsyncTransport, RequestPlan, SyncTransport

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True)
class PageContent(Generic[T]):
    """One page: its items, and the request of the next page (``None`` on the last)."""

    items: list[T]
    next_plan: RequestPlan | None


PageReader = Callable[[RequestPlan, httpx.Response], PageContent[T]]


def by_position(item: Any) -> PageReader[Any]:
    """Pages of the Agents API (``{"data": [...], "has_more"}``), each item validated as ``item``."""
    adapter: TypeAdapter[Any] = TypeAdapter(item)

    def read(plan: RequestPlan, response: httpx.Response) -> PageContent[Any]:
        page = PaginatedResponse.model_validate_json(response.content)
        items = [adapter.validate_python(entry) for entry in page.data]
        if not (page.has_more and items):
            return PageContent(items, None)
        params = dict(plan.params or {})
        params["start_index"] = int(params.get("start_index") or 0) + len(items)
        return PageContent(items, replace(plan, params=params))

    return read


class Listing(Protocol[T_co]):
    """An OpenAI-shaped list: ``data``, ``has_more`` and the ``last_id`` to page after."""

    @property
    def data(self) -> Sequence[T_co]: ...

    @property
    def has_more(self) -> bool: ...

    @property
    def last_id(self) -> str | None: ...


def by_cursor(listing: type[Listing[T]]) -> PageReader[T]:
    """Pages of an OpenAI-shaped list model, the next one requested ``after`` the page's ``last_id``."""

    def read(plan: RequestPlan, response: httpx.Response) -> PageContent[T]:
        page = listing.model_validate_json(response.content)  # type: ignore[attr-defined]
        items = list(page.data)
        if not (page.has_more and items and page.last_id):
            return PageContent(items, None)
        return PageContent(items, replace(plan, params={**(plan.params or {}), "after": page.last_id}))

    return read


class SyncPage(Generic[T]):
    """One page of a list (``data``); iterating it yields every item, fetching later pages as it goes.

    Args:
        transport: Where later pages come from.
        content: This page.
        read: How later pages are read.
    """

    def __init__(self, transport: SyncTransport, content: PageContent[T], read: PageReader[T]) -> None:
        self._transport, self._content, self._read = transport, content, read

    @classmethod
    def fetch(cls, transport: SyncTransport, plan: RequestPlan, read: PageReader[T]) -> SyncPage[T]:
        """The page that ``plan`` asks for."""
        return cls(transport, read(plan, transport.send(plan)), read)

    @property
    def data(self) -> list[T]:
        """This page's items."""
        return self._content.items

    @property
    def has_more(self) -> bool:
        """Whether a later page exists."""
        return self._content.next_plan is not None

    def next_page(self) -> SyncPage[T] | None:
        """The next page, fetched now; ``None`` after the last."""
        plan = self._content.next_plan
        return None if plan is None else SyncPage.fetch(self._transport, plan, self._read)

    def __iter__(self) -> Iterator[T]:
        page: SyncPage[T] | None = self
        while page is not None:
            yield from page.data
            page = page.next_page()


class AsyncPage(Generic[T]):
    """One page of a list (``data``); ``async for`` yields every item, fetching later pages as it goes.

    Args:
        transport: Where later pages come from.
        content: This page.
        read: How later pages are read.
    """

    def __init__(self, transport: AsyncTransport, content: PageContent[T], read: PageReader[T]) -> None:
        self._transport, self._content, self._read = transport, content, read

    @classmethod
    async def fetch(cls, transport: AsyncTransport, plan: RequestPlan, read: PageReader[T]) -> AsyncPage[T]:
        """The page that ``plan`` asks for."""
        return cls(transport, read(plan, await transport.send(plan)), read)

    @property
    def data(self) -> list[T]:
        """This page's items."""
        return self._content.items

    @property
    def has_more(self) -> bool:
        """Whether a later page exists."""
        return self._content.next_plan is not None

    async def next_page(self) -> AsyncPage[T] | None:
        """The next page, fetched now; ``None`` after the last."""
        plan = self._content.next_plan
        return None if plan is None else await AsyncPage.fetch(self._transport, plan, self._read)

    async def __aiter__(self) -> AsyncIterator[T]:
        page: AsyncPage[T] | None = self
        while page is not None:
            for item in page.data:
                yield item
            page = await page.next_page()
