"""JWTs signed by an identity provider, checked with PyJWT against the keys its JWKS publishes.

The key set is cached for ``key_recheck_period`` seconds and read again early
when a token names a key id it does not hold: a provider that rotates its keys
is followed without a restart. Unknown key ids read the set at most once per
``refetch_interval``, so tokens with made-up ids cannot flood the provider.
The set is fetched with an async client: the event loop never waits on it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx
import jwt

from ferryman.auth_settings import JwksSettings, OAuth2TokenSettings
from ferryman.logs import redacted_url

from .credentials import CLOCK_SKEW_SECONDS, CredentialRejected, principal_from_claims, tls_verify
from .principal import Principal

log = logging.getLogger(__name__)

FETCH_TIMEOUT_SECONDS = 10.0
_SYMMETRIC = ("HS256", "HS384", "HS512")


class JwksCache:
    """The provider's signing keys by key id, read again when stale or when an unknown id appears.

    Args:
        jwks: Where the set is and how long it stays fresh.
        verify: httpx's ``verify`` for the fetch.
        refetch_interval: The least time between two reads caused by unknown key ids.
    """

    def __init__(self, jwks: JwksSettings, verify: Any, refetch_interval: float) -> None:
        self._jwks, self._verify, self._refetch_interval = jwks, verify, refetch_interval
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key with this id (the only key, when the token names none), or None."""
        fetched_at = self._fetched_at
        now = time.monotonic()
        stale = fetched_at is None or now - fetched_at >= self._jwks.key_recheck_period
        known = kid in self._keys or (kid is None and len(self._keys) == 1)
        unknown = not known and (fetched_at is None or now - fetched_at >= self._refetch_interval)
        if stale or unknown:
            await self._refresh(fetched_at)
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    async def _refresh(self, seen: float | None) -> None:
        async with self._lock:
            if self._fetched_at != seen:  # another request read the set while this one waited
                return
            try:
                async with httpx.AsyncClient(verify=self._verify, timeout=FETCH_TIMEOUT_SECONDS) as client:
                    response = await client.get(self._jwks.uri)
                    response.raise_for_status()
                    body = response.json()
                    if not isinstance(body, dict):
                        raise ValueError("a JWKS is a JSON object")
                    keys = jwt.PyJWKSet.from_dict(body).keys
            except (httpx.HTTPError, ValueError, jwt.PyJWKError, jwt.PyJWKSetError) as exc:
                # Keep the keys held (a provider outage must not lock everyone out) and retry later.
                log.warning("could not read the JWKS at %s: %s", redacted_url(self._jwks.uri), type(exc).__name__)
                self._fetched_at = time.monotonic()
                return
            self._keys = {key.key_id: key for key in keys if key.algorithm_name not in _SYMMETRIC}
            self._fetched_at = time.monotonic()


class JwtAuthenticator:
    """Bearer JWTs: signature by a key of the JWKS, ``exp``/``nbf`` (30 s of skew), ``iss`` and ``aud``.

    Args:
        settings: The ``oauth2_token`` provider (with ``jwks``).
        refetch_interval: The least time between two JWKS reads caused by unknown key ids.
    """

    def __init__(self, settings: OAuth2TokenSettings, refetch_interval: float = 10.0) -> None:
        assert settings.jwks is not None, "a JWT authenticator needs jwks settings"
        self._settings = settings
        self._keys = JwksCache(settings.jwks, tls_verify(settings.verify_tls, settings.tls_cafile), refetch_interval)

    async def authenticate(self, credential: str) -> Principal:
        """The principal the token's claims name, or CredentialRejected with why."""
        try:
            header = jwt.get_unverified_header(credential)
        except jwt.InvalidTokenError as exc:
            raise CredentialRejected(f"malformed token: {type(exc).__name__}") from None
        kid = header.get("kid")
        key = await self._keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise CredentialRejected(f"token signed by unknown key id {kid!r}")
        required = ["exp", "sub", "aud"] + (["iss"] if self._settings.issuer else [])
        try:
            claims = jwt.decode(
                credential,
                key,
                algorithms=[key.algorithm_name],
                audience=self._settings.audience,
                issuer=self._settings.issuer,
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": required},
            )
        except jwt.InvalidTokenError as exc:
            # PyJWT's messages name the failed check, never the token.
            raise CredentialRejected(f"{type(exc).__name__}: {exc}") from None
        return principal_from_claims(claims, self._settings.claims_mapping)
