"""The local shield on real patterns: secrets, cards (Luhn), e-mail, phones, blocked patterns; block/redact/warn."""

from __future__ import annotations

from typing import Any

import pytest

from ferryman.api.content import (
    CompletionMessage,
    ImageContentItem,
    ImageSource,
    Message,
    SystemMessage,
    TextContentItem,
    ToolCall,
    UserMessage,
    content_to_text,
)
from ferryman.api.safety import ShieldResource
from ferryman.errors import InvalidRequestError
from ferryman.safety.local import LocalShield, luhn_valid

pytestmark = pytest.mark.anyio

SECRETS = {
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "slack_token": "xoxb-123456789012-abcdefghijkl",
    "openai_key": "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8x",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
    "email": "jane.doe@example.co.uk",
    "card_number": "4111 1111 1111 1111",
}
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7b\nq1w==\n-----END RSA PRIVATE KEY-----"


def shield(**params: Any) -> LocalShield:
    return LocalShield(ShieldResource(identifier="local", provider_id="ferryman-local", params=params))


async def found(text: str, **params: Any) -> list[str]:
    verdict = await shield(action="warn", **params).run([UserMessage(content=text)], {})
    return [] if verdict.violation is None else list(verdict.violation.metadata["kinds"])


@pytest.mark.parametrize("kind", list(SECRETS))
async def test_each_kind_is_found(kind: str) -> None:
    assert await found(f"here it is: {SECRETS[kind]} thanks") == [kind]


async def test_a_private_key_block_is_found_whole() -> None:
    verdict = await shield(action="redact").run([UserMessage(content=f"key:\n{PRIVATE_KEY}\nbye")], {})
    assert verdict.redacted is not None
    assert content_to_text(verdict.redacted[0].content) == "key:\n[REDACTED:private_key]\nbye"


@pytest.mark.parametrize(
    "text",
    [
        "order 4111 1111 1111 1112 shipped",  # Luhn-invalid: not a card
        "call 1234567890123 for details",  # 13 digits, Luhn-invalid
        "the key AKIA123 is too short",
        "sk-short and ghp_tooshort",
        "mail me at jane at example dot com",
        "version 1.2.3, 2024-01-05, price 12.50",
        "a.b.c is not a token, nor eyJ.eyJ.x",
    ],
)
async def test_lookalikes_are_not_found(text: str) -> None:
    assert await found(text) == []


def test_luhn() -> None:
    assert luhn_valid("4111111111111111")
    assert luhn_valid("5500005555555559")
    assert not luhn_valid("4111111111111112")


async def test_phone_numbers_are_opt_in() -> None:
    assert await found("ring +1 415-555-0132 today") == []
    assert await found("ring +1 415-555-0132 today", detect=["phone"]) == ["phone"]


async def test_block_is_an_error_naming_kinds_never_the_secret() -> None:
    verdict = await shield().run([UserMessage(content=f"use {SECRETS['aws_access_key']} and {SECRETS['email']}")], {})
    violation = verdict.violation
    assert violation is not None and verdict.redacted is None
    assert violation.violation_level == "error"
    assert violation.metadata["kinds"] == ["aws_access_key", "email"]
    assert SECRETS["aws_access_key"] not in str(violation.model_dump())
    assert violation.user_message == "The message was blocked: it contains aws access key, email."


async def test_warn_goes_on_unchanged() -> None:
    verdict = await shield(action="warn").run([UserMessage(content=SECRETS["email"])], {})
    assert verdict.violation is not None and verdict.violation.violation_level == "warn"
    assert verdict.redacted is None


async def test_redact_replaces_matches_in_every_kind_of_message_and_keeps_the_rest() -> None:
    messages: list[Message] = [
        SystemMessage(content="support: ops@example.com"),
        UserMessage(
            content=[
                TextContentItem(text=f"card {SECRETS['card_number']}"),
                ImageContentItem(image=ImageSource(data="aGk=")),
            ]
        ),
        CompletionMessage(
            content="calling",
            tool_calls=[ToolCall(call_id="c1", tool_name="send", arguments={"to": SECRETS["email"], "n": 2})],
        ),
    ]
    verdict = await shield(action="redact").run(messages, {})
    assert verdict.violation is not None and verdict.violation.violation_level == "info"
    assert verdict.violation.metadata["counts"] == {"card_number": 1, "email": 1}
    redacted = verdict.redacted
    assert redacted is not None
    assert redacted[0] == messages[0]  # the operator's system prompt is not inspected
    user = redacted[1]
    assert isinstance(user, UserMessage) and isinstance(user.content, list)
    assert content_to_text(user.content) == "card [REDACTED:card_number]"
    assert isinstance(user.content[1], ImageContentItem)
    answer = redacted[2]
    assert isinstance(answer, CompletionMessage) and answer.tool_calls
    assert answer.tool_calls[0].arguments == {"to": "[REDACTED:email]", "n": 2}


async def test_blocked_patterns_match_case_insensitively_and_call_params_override() -> None:
    assert await found("Project NIGHTJAR launches", blocked_patterns=[r"\bnightjar\b"]) == ["pattern"]
    verdict = await shield(blocked_patterns=["nightjar"]).run([UserMessage(content="nightjar")], {"action": "warn"})
    assert verdict.violation is not None and verdict.violation.violation_level == "warn"


async def test_clean_messages_pass() -> None:
    verdict = await shield().run([UserMessage(content="What is the capital of France?")], {})
    assert verdict.violation is None and verdict.redacted is None


@pytest.mark.parametrize(
    "params",
    [
        {"action": "shout"},
        {"detect": ["dna"]},
        {"blocked_patterns": ["("]},
        {"blocked_patterns": "x"},
        {"fail_open": "yes"},
        {"timeout_seconds": 0},
    ],
)
def test_bad_params_are_refused_at_registration(params: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError):
        shield(**params)


def test_run_options_are_read_from_params() -> None:
    configured = shield(fail_open=True, timeout_seconds=2)
    assert configured.fail_open is True and configured.timeout_seconds == 2.0
    default = shield()
    assert default.fail_open is False and default.timeout_seconds == 10.0
