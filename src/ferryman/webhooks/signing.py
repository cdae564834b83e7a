"""Signing webhook events per the Standard Webhooks specification, with a secret configured or generated once.

Each POST carries ``webhook-id`` (the delivery's id, the same on every retry),
``webhook-timestamp`` (the attempt's time, seconds since the epoch) and
``webhook-signature`` (``v1,`` and the base64 HMAC-SHA256 of ``id.timestamp.body``
under the secret's bytes). Receivers verify it with any Standard Webhooks library.
Without ``webhooks.secret``, the secret is generated once into the store (a
``server_secret`` record named ``webhooks``), where every replica sharing the store reads it.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from datetime import UTC, datetime

from standardwebhooks import Webhook

from ferryman.errors import ConfigurationError
from ferryman.storage.domain import server_secrets
from ferryman.storage.kernel.protocol import Kernel
from ferryman.webhook_settings import WebhookSettings

PREFIX = "whsec_"
SECRET_BYTES = 32
"""The size of a generated secret (the specification asks for 24 to 64 bytes)."""
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
SECRET_NAME = "webhooks"
"""The name of the generated secret's record (kind ``server_secret``)."""


def new_secret() -> str:
    """A fresh random secret, as ``whsec_`` and base64."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def checked_secret(secret: str, where: str) -> str:
    """``secret``, once it is ``whsec_`` and the base64 of 24 to 64 bytes.

    Raises:
        ConfigurationError: it is not (``where`` names the setting or record it came from).
    """
    try:
        key = base64.b64decode(secret.removeprefix(PREFIX), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not secret.startswith(PREFIX) or not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise ConfigurationError(
            f"{where} must be '{PREFIX}' followed by the base64 of {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} "
            "random bytes (unset it to have one generated)"
        )
    return secret


async def stored_secret(kernel: Kernel) -> str | None:
    """The secret the server generated into the store (None: none yet).

    Raises:
        ConfigurationError: the stored one is malformed.
    """
    found = await server_secrets.stored_secret(kernel, SECRET_NAME)
    return None if found is None else checked_secret(found, "the stored webhook secret")


async def webhook_secret(settings: WebhookSettings, kernel: Kernel) -> str:
    """The signing secret: ``webhooks.secret``, else the one generated into the store (made now if none).

    The generated one is written once, to the store the replicas share, so every replica signs with it.

    Raises:
        ConfigurationError: the configured or stored secret is malformed.
    """
    if settings.secret is not None:
        return checked_secret(settings.secret.get_secret_value(), "webhooks.secret")
    found = await server_secrets.generated_secret(kernel, SECRET_NAME, new_secret)
    return checked_secret(found, "the stored webhook secret")


def signed_headers(secret: str, message_id: str, body: str, at: float) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt to post ``body`` (JSON text) at time ``at``."""
    moment = datetime.fromtimestamp(int(at), UTC)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at)),
        "webhook-signature": Webhook(secret).sign(message_id, moment, body),
    }
