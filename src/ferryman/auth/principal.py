"""The caller of a request, known to every layer through a context variable.

The HTTP edge sets :data:`current_principal` once a request is authenticated;
tasks started while serving it (a turn running in the background) inherit it,
so storage can stamp owners and enforce the access policy without any route
passing the caller along. Work nobody asked for (lease sweeps, start-up) runs
with no principal: the server itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

ATTRIBUTE_KINDS = ("roles", "teams", "projects", "namespaces")
"""The attribute categories claims map to (Llama Stack's)."""


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    Attributes:
        id: Who it is (a JWT's subject, an API key's name).
        attributes: Its ``roles``, ``teams``, ``projects`` and ``namespaces``.
    """

    id: str
    attributes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def values(self, kind: str) -> tuple[str, ...]:
        """The principal's values of one attribute kind (none if it has none)."""
        return self.attributes.get(kind, ())


current_principal: ContextVar[Principal | None] = ContextVar("ferryman_principal", default=None)
"""The caller of the request being served; None: the server itself (no request, or no authentication)."""


@contextmanager
def acting_as(principal: Principal | None) -> Iterator[None]:
    """Run a block as ``principal`` (the HTTP edge, and tests)."""
    token = current_principal.set(principal)
    try:
        yield
    finally:
        current_principal.reset(token)


class Authenticator(Protocol):
    """Turns a bearer credential into a principal."""

    async def authenticate(self, credential: str) -> Principal:
        """The principal the credential proves.

        Raises:
            AuthenticationError: the credential is missing its mark: malformed, expired, wrongly signed,
                revoked or unknown (the reason is logged, never told).
        """
        ...
