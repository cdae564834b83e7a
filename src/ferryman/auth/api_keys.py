"""API keys: made once, shown once, stored only as a hash, checked against the store on every request.

The hash is SHA-256. A slow hash (bcrypt, argon2) protects guessable
passwords; a key here is 32 random bytes (256 bits), which no one can find
from its hash by trying, so a fast hash loses nothing and lets the lookup be a
indexed read on every request. Checking the store each time (instead of
caching) is what makes a revocation hold on every replica at once.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from ferryman.storage.domain.api_keys import ApiKeyRecord, ApiKeys

from .credentials import CredentialRejected
from .principal import ATTRIBUTE_KINDS, Principal, PrincipalKind

KEY_PREFIX = "fm_"
"""What tells an API key from a token in ``Authorization: Bearer …``."""


def hash_key(key: str) -> str:
    """The stored form of a key: its SHA-256, in hex."""
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    """A fresh key: the prefix and 32 random bytes, URL-safe."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_record(name: str, key: str, attributes: Mapping[str, Sequence[str]]) -> ApiKeyRecord:
    """The record that stores ``key`` (by hash) under ``name``, granting ``attributes``.

    Raises:
        ValueError: the name is empty or holds control characters, or an attribute kind is not one of
            roles/teams/projects/namespaces.
    """
    if not name.strip():
        raise ValueError("an API key needs a name")
    if not name.isprintable():
        raise ValueError("an API key's name cannot hold control characters (a newline, a tab…)")
    unknown = set(attributes) - set(ATTRIBUTE_KINDS)
    if unknown:
        raise ValueError(f"unknown attribute kinds: {sorted(unknown)}")
    granted = {kind: tuple(dict.fromkeys(values)) for kind, values in attributes.items() if values}
    return ApiKeyRecord(name, hash_key(key), granted, datetime.now(UTC))


class ApiKeyAuthenticator:
    """Keys made by ``ferryman keys create``, looked up by hash in the store.

    Args:
        keys: Where the keys are.
    """

    def __init__(self, keys: ApiKeys) -> None:
        self._keys = keys

    async def authenticate(self, credential: str) -> Principal:
        """The principal named by the key's record, unless it is unknown or revoked.

        The key's name lives in the API-key namespace: a key named ``alice`` and the
        identity provider's subject ``alice`` (or ``key:alice``) are different callers.
        """
        record = await self._keys.by_hash(hash_key(credential))
        if record is None:
            raise CredentialRejected("unknown API key")
        if record.revoked_at is not None:
            raise CredentialRejected(f"API key '{record.name}' is revoked")
        return Principal(PrincipalKind.API_KEY, record.name, dict(record.attributes))
