"""The ``context:`` settings: how histories are kept within a model's context, and compaction's secret."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, Field, SecretStr, field_serializer


class ContextSettings(BaseModel):
    """Compaction: ``summary_model`` writes the summaries (unset: the model of the turn or response being
    compacted), ``secret`` seals the ``compaction`` items ``POST /v1/responses/compact`` returns
    (authenticated encryption, AES-256-GCM; unset: a key generated once into the store, which every replica
    sharing the store reads). It is never logged or returned."""

    summary_model: str | None = Field(default=None, min_length=1, max_length=256)
    secret: SecretStr | None = Field(default=None, min_length=16, max_length=4096)

    @field_serializer("secret", when_used="json")
    def _reveal(self, secret: SecretStr | None) -> str | None:
        # The JSON dump carries the settings to ``--workers`` processes; repr and str stay masked.
        return secret.get_secret_value() if secret is not None else None

    def key(self) -> bytes | None:
        """The 32-byte key of the compaction items derived from ``secret`` (None: unset, the store's is used)."""
        if self.secret is None:
            return None
        return hashlib.sha256(self.secret.get_secret_value().encode()).digest()
