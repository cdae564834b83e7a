"""The caller of a request, known to every layer through a context variable.

The HTTP edge sets :data:`current_principal` once a request is authenticated;
tasks started while serving it (a turn running in the background) inherit it,
so the services can stamp owners and apply the access policy
(:mod:`ferryman.services.access`) without any route passing the caller along. Work
nobody asked for (lease sweeps, start-up) runs with no principal: the server
itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

ATTRIBUTE_KINDS = ("roles", "teams", "projects", "namespaces")
"""The attribute categories claims map to (Llama Stack's)."""


class PrincipalKind(StrEnum):
    """The namespace a principal's id lives in: who vouched for it.

    The kind is set by the authenticator that proved the credential, never read
    from the credential, so no claim value can move a caller into another namespace.
    """

    API_KEY = "api_key"
    """A key made by ``ferryman keys create``; the id is the key's name."""
    SUBJECT = "subject"
    """An identity provider's subject (a JWT's or an introspected token's ``sub``)."""


_PREFIXES = {PrincipalKind.API_KEY: "key:", PrincipalKind.SUBJECT: "sub:"}


@dataclass(frozen=True)
class Principal:
    """An authenticated caller, identified by ``(kind, id)``.

    Attributes:
        kind: The namespace of ``id``.
        id: Who it is within that namespace (a JWT's subject, an API key's name).
        attributes: Its ``roles``, ``teams``, ``projects`` and ``namespaces``.
    """

    kind: PrincipalKind
    id: str
    attributes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A caller passing the id where the kind goes must fail here, not make a principal of kind "alice".
        object.__setattr__(self, "kind", PrincipalKind(self.kind))

    @property
    def qualified(self) -> str:
        """The one text naming the principal across namespaces: ``key:NAME`` or ``sub:ID``.

        Used wherever a principal is a string (audit records, quota counters, idempotency keys'
        owners): the kind's prefix comes first and contains no id, so two principals never share it.
        """
        return _PREFIXES[self.kind] + self.id

    def same_as(self, other: Principal | None) -> bool:
        """Whether ``other`` is the same caller: the same kind and id (attributes may have changed since)."""
        return other is not None and (other.kind, other.id) == (self.kind, self.id)

    def values(self, kind: str) -> tuple[str, ...]:
        """The principal's values of one attribute kind (none if it has none)."""
        return self.attributes.get(kind, ())


def parse_principal(text: str) -> tuple[PrincipalKind, str]:
    """The ``(kind, id)`` a principal's text names, as an access policy rule writes it.

    ``key:NAME`` is an API key, ``sub:ID`` an identity provider's subject, and any
    other text a subject as it is (Llama Stack's form: ``principal: alice``). A
    subject whose id starts with ``key:`` or ``sub:`` is written with ``sub:`` first.
    """
    for kind, prefix in _PREFIXES.items():
        if text.startswith(prefix):
            return kind, text.removeprefix(prefix)
    return PrincipalKind.SUBJECT, text


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
