"""Webhook signing and its secret: Standard Webhooks headers, a secret generated once (0600), settings' bounds."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import SecretStr
from standardwebhooks import Webhook, WebhookVerificationError

from ferryman.auth.policy import AccessPolicy
from ferryman.config import Settings, load_settings
from ferryman.errors import ConfigurationError, InvalidRequestError
from ferryman.safe_fetch import FetchPolicy
from ferryman.services.access import Access
from ferryman.services.webhooks import Webhooks
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.kernel.memory import MemoryKernel
from ferryman.webhook_settings import WebhookSettings
from ferryman.webhooks.outbox import Outbox
from ferryman.webhooks.sender import check_url, shown_url
from ferryman.webhooks.signing import new_secret, signed_headers, stored_secret, webhook_secret

pytestmark = pytest.mark.anyio


def test_headers_verify_with_the_standard_library_and_a_changed_body_does_not() -> None:
    secret, body, now = new_secret(), '{"type":"turn.completed","data":{}}', 1_700_000_000.5
    headers = signed_headers(secret, "msg_1", body, now)
    assert headers["webhook-id"] == "msg_1" and headers["webhook-timestamp"] == "1700000000"
    assert headers["webhook-signature"].startswith("v1,")
    verifier = Webhook(secret)
    assert verifier.sign("msg_1", datetime.fromtimestamp(1_700_000_000, UTC), body) == headers["webhook-signature"]
    with pytest.raises(WebhookVerificationError):
        verifier.verify(body.replace("{}", '{"x":1}'), headers)


async def test_an_unset_secret_is_generated_once_into_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path / "home"))
    kernel = MemoryKernel(SCHEMA)
    await kernel.open()
    assert await stored_secret(kernel) is None
    first = await webhook_secret(WebhookSettings(), kernel)
    assert first.startswith("whsec_") and await webhook_secret(WebhookSettings(), kernel) == first
    assert await stored_secret(kernel) == first
    assert not (tmp_path / "home").exists()
    await kernel.close()


async def test_a_configured_secret_wins_and_a_malformed_one_is_refused_naming_the_setting() -> None:
    kernel = MemoryKernel(SCHEMA)
    chosen = new_secret()
    assert await webhook_secret(WebhookSettings(secret=SecretStr(chosen)), kernel) == chosen
    for bad in ("plain", "whsec_c2hvcnQ=", "whsec_not base64!"):
        with pytest.raises(ConfigurationError, match=r"webhooks\.secret must be 'whsec_'"):
            await webhook_secret(WebhookSettings(secret=SecretStr(bad)), kernel)


def test_the_secrets_survive_the_json_trip_to_worker_processes_and_stay_masked_in_repr() -> None:
    webhook, context = new_secret(), "a compaction secret of some length"
    settings = Settings(webhooks=WebhookSettings(secret=SecretStr(webhook)), context={"secret": context})
    assert webhook not in repr(settings) and context not in repr(settings)
    again = Settings.model_validate_json(settings.model_dump_json())
    assert again.webhooks.secret is not None and again.webhooks.secret.get_secret_value() == webhook
    assert again.context.secret is not None and again.context.secret.get_secret_value() == context
    assert Settings.model_validate_json(Settings().model_dump_json()).webhooks.secret is None


def test_out_of_bounds_settings_are_refused_naming_them(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("webhooks:\n  max_attempts: 0\n  timeout_seconds: 0\n  max_payload_bytes: 10\n")
    with pytest.raises(ConfigurationError) as refused:
        load_settings(str(config))
    for name in ("webhooks.max_attempts", "webhooks.timeout_seconds", "webhooks.max_payload_bytes"):
        assert name in refused.value.message


def test_backoff_doubles_up_to_its_cap_each_wait_jittered_down_by_up_to_half() -> None:
    settings = WebhookSettings(backoff_seconds=2, max_backoff_seconds=10)
    for failures, full in ((1, 2), (2, 4), (3, 8), (4, 10), (500, 10)):
        waits = {settings.backoff(failures) for _ in range(50)}
        assert all(full / 2 <= wait <= full for wait in waits) and len(waits) > 1


async def test_loopback_is_refused_unless_allowed() -> None:
    with pytest.raises(InvalidRequestError, match="fetch.allowed_hosts") as refused:
        await check_url("http://127.0.0.1:9/hook?token=t", FetchPolicy(), 5)
    assert refused.value.field == "webhook" and "token" not in refused.value.message
    assert await check_url("http://127.0.0.1:9/hook", FetchPolicy(allowed_hosts=["127.0.0.0/8"]), 5)


async def test_an_unresolvable_host_and_a_private_one_are_refused_alike_and_the_lookup_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = []
    for url in ("http://no-such-host.invalid/hook", "http://10.1.2.3/hook"):
        with pytest.raises(InvalidRequestError) as refused:
            await check_url(url, FetchPolicy(), 5)
        messages.append(refused.value.message.replace(shown_url(url), "URL"))
    assert messages[0] == messages[1] and "fetch.allowed_hosts" in messages[0]

    async def never_answers(*args: object, **options: object) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", never_answers)
    with pytest.raises(InvalidRequestError, match=r"within 0\.05 s"):
        await check_url("http://slow.example/hook", FetchPolicy(), 0.05)


async def test_an_event_over_the_payload_limit_is_sent_thin() -> None:
    kernel = MemoryKernel(SCHEMA)
    await kernel.open()
    webhooks = Webhooks(kernel, Access(AccessPolicy()), settings=WebhookSettings(max_payload_bytes=1024))
    data = {"turn_id": "run", "status": "completed", "text": "x" * 2000}
    await webhooks.notify("http://example.com/h", "run.0", "run", "turn.completed", data, None)
    await webhooks.notify("http://example.com/h", "run.0", "run", "turn.completed", {"text": "again"}, None)
    (delivery,) = (await webhooks.list(None)).data
    assert delivery.status == "pending" and delivery.run_id == "run"
    (claimed,) = await Outbox(kernel).claim(delivery.created_at + 60, 10, 10)
    event = json.loads(claimed.delivery.payload)
    assert event["type"] == "turn.completed"
    assert event["data"] == {"id": "run", "status": "completed", "data_omitted": True}
    await kernel.close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.slack.com/services/T0/B0/secretpart", "https://hooks.slack.com/…"),
        ("http://user:pw@example.com:8080/hook?token=t#f", "http://example.com:8080/…"),
        ("http://[::1]:9/x", "http://[::1]:9/…"),
        ("not a url at all", "<invalid URL>"),
    ],
)
def test_a_webhook_url_is_shown_without_its_path_credentials_or_query(url: str, shown: str) -> None:
    assert shown_url(url) == shown
