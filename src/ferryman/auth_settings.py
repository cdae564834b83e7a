"""``server.auth``: how callers prove who they are, in Llama Stack's ``run.yaml`` shape.

Both of Llama Stack's forms are read, so that its users can move the section over::

    auth:                                  # 0.2.12
      provider_type: oauth2_token
      config: {jwks: {uri: …}, issuer: …, audience: …, claims_mapping: {…}}
      access_policy: [...]

    auth:                                  # later releases
      provider_config: {type: oauth2_token, jwks: {uri: …}, issuer: …, audience: …}
      access_policy: [...]

Ferryman adds ``api_keys`` (default true): keys made with ``ferryman keys
create`` are accepted too; ``auth: {api_keys: true}`` alone serves teams
without an identity provider.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, Field, SecretStr, field_serializer, model_validator

OAUTH2_TOKEN: Final = "oauth2_token"

DEFAULT_CLAIMS_MAPPING = {
    "sub": "roles",
    "username": "roles",
    "groups": "teams",
    "team": "teams",
    "project": "projects",
    "tenant": "namespaces",
    "namespace": "namespaces",
    "roles": "roles",
}
"""Llama Stack's default: which claim's values become which attribute kind."""


class JwksSettings(BaseModel):
    """Where the identity provider publishes its signing keys, and how often to read them again."""

    uri: str
    key_recheck_period: int = Field(default=3600, gt=0)


class IntrospectionSettings(BaseModel):
    """An RFC 7662 introspection endpoint and the client credentials it asks for."""

    url: str
    client_id: str
    client_secret: SecretStr
    send_secret_in_body: bool = False

    @field_serializer("client_secret", when_used="json")
    def _reveal(self, secret: SecretStr) -> str:
        # The JSON dump carries the settings to ``--workers`` processes; repr and str stay masked.
        return secret.get_secret_value()


class OAuth2TokenSettings(BaseModel):
    """Bearer tokens from an identity provider: JWTs checked against its JWKS, or opaque ones introspected."""

    type: Literal["oauth2_token"] = OAUTH2_TOKEN
    issuer: str | None = None
    audience: str = "llama-stack"
    claims_mapping: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_CLAIMS_MAPPING))
    jwks: JwksSettings | None = None
    introspection: IntrospectionSettings | None = None
    verify_tls: bool = True
    tls_cafile: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> OAuth2TokenSettings:
        if (self.jwks is None) == (self.introspection is None):
            raise ValueError("oauth2_token needs exactly one of 'jwks' and 'introspection'")
        return self


class AuthSettings(BaseModel):
    """``server.auth``: the token provider (if any), whether API keys are accepted, and the access policy.

    ``access_policy`` stays raw data here: :mod:`ferryman.auth.policy` reads it.
    """

    provider_config: OAuth2TokenSettings | None = None
    api_keys: bool = True
    access_policy: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_provider_type(cls, data: Any) -> Any:
        """The 0.2.12 form, ``provider_type`` with ``config``, becomes ``provider_config``."""
        if not isinstance(data, dict) or "provider_type" not in data:
            return data
        data = dict(data)
        kind = data.pop("provider_type")
        if kind != OAUTH2_TOKEN:
            raise ValueError(f"auth provider_type '{kind}' is not supported (only {OAUTH2_TOKEN})")
        if "provider_config" in data:
            raise ValueError("give either 'provider_type' with 'config' or 'provider_config', not both")
        data["provider_config"] = {**(data.pop("config", None) or {}), "type": kind}
        return data

    @model_validator(mode="after")
    def _accepts_something(self) -> AuthSettings:
        if self.provider_config is None and not self.api_keys:
            raise ValueError("auth accepts no credential: configure a provider or leave api_keys on")
        return self
