"""Turning answers into ``ferryman.api`` models, and request values into JSON."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

M = TypeVar("M", bound=BaseModel)

Parser = Callable[[httpx.Response], Any]


def model(cls: type[M]) -> Callable[[httpx.Response], M]:
    """A parser of an answer that is one ``cls``."""
    return lambda response: cls.model_validate_json(response.content)


def adapted(kind: Any) -> Callable[[httpx.Response], Any]:
    """A parser of an answer of any type pydantic validates (a union, a list)."""
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    return lambda response: adapter.validate_json(response.content)


def data_of(cls: type[M]) -> Callable[[httpx.Response], list[M]]:
    """A parser of a ``{"data": [...]}`` answer of ``cls`` items."""
    adapter = TypeAdapter(list[cls])  # type: ignore[valid-type]
    return lambda response: adapter.validate_python(response.json()["data"])


def raw_json(response: httpx.Response) -> Any:
    """The answer's JSON as it came."""
    return response.json()


def nothing(response: httpx.Response) -> None:
    """For answers without a body worth reading (a delete's)."""


def jsonable(value: Any) -> Any:
    """A request value as JSON: models dumped (their unset ``None`` fields left out), containers walked."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, Mapping):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [jsonable(item) for item in value]
    return value


def body(**fields: Any) -> dict[str, Any]:
    """A JSON body of the given fields, ``None`` ones left out."""
    return {name: jsonable(value) for name, value in fields.items() if value is not None}
