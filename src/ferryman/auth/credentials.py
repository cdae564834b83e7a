"""What every authenticator shares: the rejection whose reason is logged, never told, and claims to attributes."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from ferryman.errors import AuthenticationError

from .principal import ATTRIBUTE_KINDS, Principal, PrincipalKind


class CredentialRejected(AuthenticationError):
    """A 401 whose ``reason`` is logged and audited, never told (the body is the generic one)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


def claim_values(claims: Mapping[str, Any], claim: str) -> tuple[str, ...]:
    """A claim's values as strings: a list's items, a string's space-separated words (OAuth ``scope``)."""
    value: Any = claims
    for part in claim.split("."):  # nested claims: "realm_access.roles"
        if not isinstance(value, Mapping) or part not in value:
            return ()
        value = value[part]
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list | tuple):
        return tuple(str(item) for item in value)
    return () if value is None else (str(value),)


def principal_from_claims(claims: Mapping[str, Any], mapping: Mapping[str, str]) -> Principal:
    """The principal a token's claims name: the subject ``sub``, with ``mapping`` making its attributes.

    Whatever ``sub`` holds (``key:alice`` too) is a subject: the namespace comes from
    who checked the credential, never from the claims.

    Raises:
        CredentialRejected: the claims have no subject.
    """
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise CredentialRejected("token has no subject")
    attributes: dict[str, list[str]] = {}
    for claim, kind in mapping.items():
        if kind not in ATTRIBUTE_KINDS:
            continue
        values = attributes.setdefault(kind, [])
        values.extend(v for v in claim_values(claims, claim) if v not in values)
    granted = {kind: tuple(values) for kind, values in attributes.items() if values}
    return Principal(PrincipalKind.SUBJECT, subject, granted)


CLOCK_SKEW_SECONDS = 30
"""How far ``exp`` and ``nbf`` may be off: clocks of the identity provider and the server differ a little."""


def tls_verify(verify_tls: bool, cafile: str | None) -> ssl.SSLContext | bool:
    """What httpx's ``verify`` gets from ``verify_tls`` and ``tls_cafile``."""
    if not verify_tls:
        return False
    return ssl.create_default_context(cafile=cafile) if cafile else True
