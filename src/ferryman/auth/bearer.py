"""From a bearer credential to a principal: API keys by their prefix, tokens by the configured provider."""

from __future__ import annotations

from ferryman.auth_settings import AuthSettings
from ferryman.storage.domain.api_keys import ApiKeys

from .api_keys import KEY_PREFIX, ApiKeyAuthenticator
from .credentials import CredentialRejected
from .principal import Authenticator, Principal


class BearerAuthenticator:
    """API keys (``fm_`` prefix) to the key store, anything else to the token provider.

    Args:
        api_keys: The key authenticator, None when API keys are off.
        tokens: The token provider's authenticator, None when none is configured.
    """

    def __init__(self, api_keys: Authenticator | None, tokens: Authenticator | None) -> None:
        self._api_keys, self._tokens = api_keys, tokens

    async def authenticate(self, credential: str) -> Principal:
        """The principal the credential proves, or CredentialRejected."""
        if credential.startswith(KEY_PREFIX):
            if self._api_keys is None:
                raise CredentialRejected("API keys are not accepted")
            return await self._api_keys.authenticate(credential)
        if self._tokens is None:
            raise CredentialRejected("tokens are not accepted (no token provider)")
        return await self._tokens.authenticate(credential)


def authenticator_for(settings: AuthSettings | None, keys: ApiKeys) -> Authenticator | None:
    """The authenticator ``server.auth`` asks for over the key store; None when authentication is off."""
    if settings is None:
        return None
    tokens: Authenticator | None = None
    provider = settings.provider_config
    if provider is not None:
        # The token providers' modules (PyJWT and cryptography: 9 MiB; httpx) load only where one is configured.
        from .introspection import IntrospectionAuthenticator
        from .jwt_tokens import JwtAuthenticator

        tokens = JwtAuthenticator(provider) if provider.jwks is not None else IntrospectionAuthenticator(provider)
    return BearerAuthenticator(ApiKeyAuthenticator(keys) if settings.api_keys else None, tokens)
