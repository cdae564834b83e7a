"""The local shield's secrets: detect-secrets' plugins and the patterns beside them, each finding named by its kind.

The issue's example, an unquoted AWS secret access key, is the first test. Ordinary prose must
pass (no finding), and nothing may reach detect-secrets' global settings or the network.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from detect_secrets.plugins.keyword import DENYLIST

from ferryman.api.content import Message, UserMessage, content_to_text
from ferryman.api.safety import ShieldResource
from ferryman.safety import local
from ferryman.safety.local import LocalShield
from ferryman.safety.secrets import KEYWORD_STEMS

pytestmark = pytest.mark.anyio

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
UNQUOTED_AWS = f"aws_secret_access_key={AWS_SECRET}"

FINDINGS = {
    "aws_secret_key": (f'aws_secret_access_key = "{AWS_SECRET}"', AWS_SECRET),
    "private_key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    "gitlab_token": ("glpat-" + "x1Y2z3W4v5U6t7S8r9Q0", "x1Y2z3W4v5U6t7S8r9Q0"),
    "slack_token": (
        "https://hooks.slack.com/services/T00000000/B00000000/" + "XXXXXXXXXXXXXXXXXXXXXXXX",
        "XXXXXXXXXXXXXXXXXXXXXXXX",
    ),
    "stripe_key": ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    "openai_key": ("sk-abcdefghij1234567890" + "T3BlbkFJ" + "ABCDEFGHIJ0987654321", "T3BlbkFJ"),
    "github_token": ("github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP", "11ABCDEFG"),
    "sendgrid_key": ("SG." + "a" * 22 + "." + "b" * 43, "b" * 43),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        "dBjftJeZ4CVP",  # the signature goes too, not only the part the plugin's match covers
    ),
    "secret_keyword": ("db_password=Tr0ub4dor&3", "Tr0ub4dor&3"),
    "high_entropy_string": (
        'commit "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"',
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
    ),
    "basic_auth": ("https://user:pa55word@example.com/x", "pa55word"),
}

PROSE = [
    "Secretary: Jane Smith will call you.",
    "My password is safe with me.",
    "The secret: practice every day.",
    "Reset your password: click the link below",
    "passwords: none yet",
    "Our secret=sauce",
    "pwd: prints the working directory",
    "The API key field is required.",
    "password = input('Password: ')",
    "api_key: ${API_KEY}",
    "Use the token bucket algorithm (rate=10/s).",
    'The word "antidisestablishmentarianism" is long',
    'Enter "John.Smith_1987" as the username',
    "Use 'npm install --save-dev typescript@5.4.2'",
    "See https://example.com/path?query=1&x=2",
    "Version 2.4.1 (build 20240105), commit a1b2c3d",
]


def shield(**params: Any) -> LocalShield:
    return LocalShield(ShieldResource(identifier="local", provider_id="ferryman-local", params=params))


async def test_an_unquoted_aws_secret_access_key_is_blocked_by_kind() -> None:
    verdict = await shield().run([UserMessage(content=f"my creds: {UNQUOTED_AWS}")], {})
    assert verdict.violation is not None and verdict.violation.violation_level == "error"
    assert verdict.violation.metadata["kinds"] == ["aws_secret_key"]
    assert verdict.violation.metadata["counts"] == {"aws_secret_key": 1}
    assert AWS_SECRET not in str(verdict.violation.model_dump())
    assert verdict.violation.user_message == "The message was blocked: it contains aws secret key."


async def test_an_unquoted_aws_secret_access_key_is_redacted_whole() -> None:
    verdict = await shield(action="redact").run([UserMessage(content=UNQUOTED_AWS)], {})
    assert verdict.redacted is not None
    assert content_to_text(verdict.redacted[0].content) == "aws_secret_access_key=[REDACTED:aws_secret_key]"


@pytest.mark.parametrize("kind", list(FINDINGS))
async def test_each_finding_names_its_kind_and_is_redacted(kind: str) -> None:
    text, secret_part = FINDINGS[kind]
    verdict = await shield(action="redact").run([UserMessage(content=f"here: {text} ok")], {})
    assert verdict.violation is not None
    assert verdict.violation.metadata["kinds"] == [kind]
    assert verdict.redacted is not None
    redacted = content_to_text(verdict.redacted[0].content)
    assert secret_part not in redacted and f"[REDACTED:{kind}]" in redacted and redacted.endswith(" ok")


@pytest.mark.parametrize("text", PROSE)
async def test_ordinary_prose_has_no_secret(text: str) -> None:
    verdict = await shield().run([UserMessage(content=text)], {})
    assert verdict.violation is None, verdict.violation


async def test_detect_picks_among_the_library_kinds() -> None:
    text = f"{UNQUOTED_AWS} and {FINDINGS['stripe_key'][0]}"
    verdict = await shield(action="warn", detect=["stripe_key"]).run([UserMessage(content=text)], {})
    assert verdict.violation is not None and verdict.violation.metadata["kinds"] == ["stripe_key"]


def test_every_denylisted_keyword_holds_a_stem_of_the_line_gate() -> None:
    """The keyword plugin is asked only about lines holding a stem: none of its words may lack one."""
    for word in DENYLIST:
        assert any(stem in word.replace("_?", "_").lower() for stem in KEYWORD_STEMS), word


async def test_no_global_settings_no_verification_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the scan reached detect-secrets' settings or the network")

    monkeypatch.setattr("detect_secrets.plugins.base.get_settings", refuse)
    monkeypatch.setattr("requests.api.request", refuse)
    monkeypatch.setattr("requests.Session.request", refuse)
    texts = [text for text, _ in FINDINGS.values()]
    verdict = await shield(action="warn").run([UserMessage(content="\n".join(texts))], {})
    assert verdict.violation is not None and set(verdict.violation.metadata["kinds"]) == set(FINDINGS)


async def test_a_megabyte_of_ordinary_text_is_scanned_in_moments() -> None:
    line = "The quick brown fox jumps over the lazy dog; see section 4.2 (page 17) for the details. "
    text = "\n".join([line * 10] * 1200)
    started = time.perf_counter()
    verdict = await shield().run([UserMessage(content=text)], {})
    assert verdict.violation is None
    assert time.perf_counter() - started < 5.0


CODE = [
    "password = form.password",
    "secret_key = settings.SECRET_KEY",
    "  api_key = config.api_key  # from the config",
    "if password == confirm_password:",
    "api_key=YOUR_API_KEY_HERE",
    "db_password = os.getenv('DB_PASSWORD')",
    "AWS token fix: see commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
]


@pytest.mark.parametrize("text", CODE)
async def test_code_naming_a_secret_has_none(text: str) -> None:
    """Code the model is asked about assigns secrets by name: variables, attribute paths, a commit id."""
    verdict = await shield().run([UserMessage(content=text)], {})
    assert verdict.violation is None, verdict.violation


async def test_a_value_beside_a_name_is_still_a_secret() -> None:
    verdict = await shield(action="redact").run([UserMessage(content="password=hunter2xyz; db.host = x")], {})
    assert verdict.redacted is not None
    assert content_to_text(verdict.redacted[0].content) == "password=[REDACTED:secret_keyword]; db.host = x"


CRAFTED = {
    # Each took detect-secrets' patterns, tried from every place of the line, 20 s to a minute.
    "keyword_run": "secret_" * 1500,
    "openai_prefixes": "sk-" * 20_000,
    "npm_slashes": "//" * 30_000,
    "email_dots": "a." * 100_000,
}


@pytest.mark.parametrize("kind", list(CRAFTED))
async def test_a_line_crafted_against_the_patterns_is_scanned_in_moments(kind: str) -> None:
    started = time.perf_counter()
    await shield(action="warn").run([UserMessage(content=CRAFTED[kind])], {})
    assert time.perf_counter() - started < 5.0


@pytest.mark.parametrize("at", [1000, 1020, 1024, 3000])
async def test_a_secret_across_the_scan_pieces_is_redacted_whole(at: int) -> None:
    token = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
    text = "x " * (at // 2) + f"token {token} and db_password=Tr0ub4dor&3 end"
    verdict = await shield(action="redact").run([UserMessage(content=text)], {})
    assert verdict.redacted is not None
    redacted = content_to_text(verdict.redacted[0].content)
    assert redacted.endswith("token [REDACTED:github_token] and db_password=[REDACTED:secret_keyword] end")


async def test_a_scan_given_up_on_reads_no_further_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shield run cancelled (its timeout) does not hold its worker thread for the messages it has not read."""
    entered, proceed, finished = threading.Event(), threading.Event(), threading.Event()
    scanned: list[str] = []
    scan_one, scan_all = local._Scan.message, local._scan_messages

    def message(self: Any, given: Message) -> Message:
        scanned.append(content_to_text(given.content))
        entered.set()
        proceed.wait(timeout=30)
        return scan_one(self, given)

    def messages(*args: Any) -> list[Message]:
        try:
            return scan_all(*args)
        finally:
            finished.set()

    monkeypatch.setattr(local._Scan, "message", message)
    monkeypatch.setattr(local, "_scan_messages", messages)
    run = asyncio.create_task(shield().run([UserMessage(content="first"), UserMessage(content="second")], {}))
    assert await asyncio.to_thread(entered.wait, 30)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    proceed.set()
    assert await asyncio.to_thread(finished.wait, 30)
    assert scanned == ["first"]
