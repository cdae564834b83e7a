"""The ``encrypted_content`` of compaction items: sealed with the server's key, opened only by it, never forged."""

from __future__ import annotations

import base64

import pytest
from pydantic import SecretStr

from ferryman.api.responses import Item, MessageItem
from ferryman.context_settings import ContextSettings
from ferryman.errors import ConfigurationError, InvalidRequestError
from ferryman.services.responses.compaction import KEY_NAME, Sealer, Sealing
from ferryman.storage.domain.kinds import SCHEMA, SERVER_SECRET
from ferryman.storage.domain.server_secrets import stored_secret
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.memory import MemoryKernel

SUMMARY = "Ada keeps the ferries; she asked for the timetable."


def test_a_sealed_summary_opens_with_its_key_only_and_hides_its_text() -> None:
    sealer = Sealer(ContextSettings(secret=SecretStr("s" * 32)).key())
    sealed, again = sealer.seal(SUMMARY), sealer.seal(SUMMARY)
    assert sealed != again  # a fresh nonce each time
    assert base64.urlsafe_b64decode(sealed)[:12] != base64.urlsafe_b64decode(again)[:12]
    assert "Ada" not in sealed and "Ada" not in base64.urlsafe_b64decode(sealed).decode("latin-1")
    assert sealer.open(sealed) == SUMMARY
    other = Sealer(ContextSettings(secret=SecretStr("t" * 32)).key())
    with pytest.raises(InvalidRequestError, match="encrypted_content"):
        other.open(sealed)


@pytest.mark.parametrize("forged", ["", "not base64!", "AAAA", "A" * 64])
def test_a_forged_or_changed_seal_is_refused(forged: str) -> None:
    sealer = Sealer(ContextSettings(secret=SecretStr("s" * 32)).key())
    raw = bytearray(base64.urlsafe_b64decode(sealer.seal(SUMMARY)))
    raw[-1] ^= 1
    for sealed in (forged, base64.urlsafe_b64encode(bytes(raw)).decode()):
        with pytest.raises(InvalidRequestError, match="encrypted_content") as refused:
            sealer.open(sealed)
        assert refused.value.field == "input"


@pytest.mark.anyio
async def test_without_a_secret_one_key_is_generated_into_the_store_every_replica_shares() -> None:
    kernel = MemoryKernel(SCHEMA)
    first, second = Sealing(None, kernel), Sealing(None, kernel)  # two replicas of one store
    plain: list[Item] = [MessageItem(role="user", content="hi")]
    assert await first.opened(plain) == plain
    assert await stored_secret(kernel, KEY_NAME) is None  # nothing sealed or opened yet: no key made
    sealed = await first.seal(SUMMARY)
    assert (await second.sealer()).open(sealed) == SUMMARY
    with pytest.raises(InvalidRequestError):
        (await Sealing(ContextSettings(secret=SecretStr("s" * 32)).key(), kernel).sealer()).open(sealed)


@pytest.mark.anyio
async def test_a_malformed_stored_key_is_refused_naming_the_setting() -> None:
    kernel = MemoryKernel(SCHEMA)
    await kernel.write([ops.Put(SERVER_SECRET, KEY_NAME, {"secret": "not a key"})])
    with pytest.raises(ConfigurationError, match="context.secret"):
        await Sealing(None, kernel).sealer()
