"""Opaque tokens, asked about at the provider's RFC 7662 introspection endpoint.

An answer is cached (by the token's hash, never the token) for a short while,
at most until the token expires, so a busy client does not cost one
introspection per request; a revoked token is refused at the latest when its
cache entry ends.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import httpx

from ferryman.auth_settings import OAuth2TokenSettings

from .credentials import CLOCK_SKEW_SECONDS, CredentialRejected, principal_from_claims, tls_verify
from .principal import Principal

FETCH_TIMEOUT_SECONDS = 10.0


class IntrospectionAuthenticator:
    """Bearer tokens the introspection endpoint calls ``active``.

    Args:
        settings: The ``oauth2_token`` provider (with ``introspection``).
        cache_seconds: How long an active token's principal is reused.
        cache_size: How many tokens' principals are held at most.
    """

    def __init__(self, settings: OAuth2TokenSettings, cache_seconds: float = 30.0, cache_size: int = 1024) -> None:
        assert settings.introspection is not None, "an introspection authenticator needs introspection settings"
        self._settings, self._endpoint = settings, settings.introspection
        self._verify = tls_verify(settings.verify_tls, settings.tls_cafile)
        self._cache_seconds, self._cache_size = cache_seconds, cache_size
        self._cache: dict[str, tuple[Principal, float]] = {}

    async def authenticate(self, credential: str) -> Principal:
        """The principal of an active token, or CredentialRejected with why."""
        digest = hashlib.sha256(credential.encode()).hexdigest()
        cached = self._cache.get(digest)
        if cached is not None and cached[1] > time.time():
            return cached[0]
        self._cache.pop(digest, None)
        claims = await self._introspect(credential)
        if claims.get("active") is not True:
            raise CredentialRejected("token is not active")
        self._check_audience_and_issuer(claims)
        expires = claims.get("exp")
        until = time.time() + self._cache_seconds
        if isinstance(expires, int | float):
            if expires + CLOCK_SKEW_SECONDS <= time.time():
                raise CredentialRejected("token has expired")
            until = min(until, float(expires))
        if "sub" not in claims and isinstance(claims.get("username"), str):
            claims = {**claims, "sub": claims["username"]}
        principal = principal_from_claims(claims, self._settings.claims_mapping)
        if len(self._cache) >= self._cache_size:
            self._cache.pop(next(iter(self._cache)))  # the oldest entry
        self._cache[digest] = (principal, until)
        return principal

    def _check_audience_and_issuer(self, claims: dict[str, Any]) -> None:
        """A token issued for another resource server (or by another issuer) is not ours, however active."""
        audience = claims.get("aud")
        if audience is not None:
            audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
            if self._settings.audience not in audiences:
                raise CredentialRejected("token is for another audience")
        issuer = self._settings.issuer
        if issuer is not None and claims.get("iss") not in (None, issuer):
            raise CredentialRejected("token is from another issuer")

    async def _introspect(self, token: str) -> dict[str, Any]:
        endpoint = self._endpoint
        secret = endpoint.client_secret.get_secret_value()
        form = {"token": token}
        auth: httpx.Auth = httpx.BasicAuth(endpoint.client_id, secret)
        if endpoint.send_secret_in_body:
            form |= {"client_id": endpoint.client_id, "client_secret": secret}
            auth = httpx.Auth()  # sends the request as it is
        try:
            async with httpx.AsyncClient(verify=self._verify, timeout=FETCH_TIMEOUT_SECONDS) as client:
                response = await client.post(endpoint.url, data=form, auth=auth)
                response.raise_for_status()
                claims = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise CredentialRejected(f"introspection failed: {type(exc).__name__}") from None
        if not isinstance(claims, dict):
            raise CredentialRejected("introspection answered no JSON object")
        return claims
