"""No value forges a log line: records stay one line (tracebacks continued), audit records under any formatter,
and a URL is logged without its credentials."""

from __future__ import annotations

import io
import logging
import logging.config
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferryman.auth.audit import audit
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.cli.serve import uvicorn_options
from ferryman.config import Settings
from ferryman.errors import InvalidRequestError
from ferryman.logs import CONTINUATION, FORMAT, OneLineFormatter, escape, redacted_url
from ferryman.safe_fetch import FetchPolicy, fetch
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script
from inprocess import scripted_provider, serving

FORGED = "2030-01-01 00:00:00,000 INFO ferryman.audit: delete delete agent::x by key:admin"


@pytest.fixture()
def audit_lines() -> Iterator[io.StringIO]:
    """What the audit logger writes through a plain formatter (not ferryman's): the message as it is."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("ferryman.audit")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_shield_id_with_a_newline_stays_in_its_audit_line(audit_lines: io.StringIO) -> None:
    shield_id = f"guard\n{FORGED}\x1b[2J"
    records: list[logging.LogRecord] = []
    catcher = logging.Handler()
    catcher.emit = records.append  # type: ignore[method-assign,assignment]
    logging.getLogger("ferryman.audit").addHandler(catcher)
    try:
        with acting_as(Principal(PrincipalKind.API_KEY, "ops")):
            audit("create", "create", f"shield::{shield_id}")
    finally:
        logging.getLogger("ferryman.audit").removeHandler(catcher)
    [line] = audit_lines.getvalue().splitlines()
    assert line.startswith("INFO ferryman.audit: create create shield::guard\\n2030") and "\x1b" not in line
    assert line.endswith("\\x1b[2J by key:ops")
    [record] = records
    assert record.resource == f"shield::{shield_id}"  # type: ignore[attr-defined]  # the field holds the value as is


@pytest.mark.anyio
async def test_an_unauthenticated_path_with_a_newline_stays_in_its_audit_line(
    tmp_path: Path, audit_lines: io.StringIO
) -> None:
    store = SqliteStore(str(tmp_path / "audit.db"))
    services = build_services(store, [scripted_provider(Script())], authenticator=BearerAuthenticator(None, None))
    async with serving(services) as client:
        answer = await client.get("/v1/agents/x%0A" + FORGED.replace(" ", "%20"))
    assert answer.status_code == 401
    [line] = audit_lines.getvalue().splitlines()
    assert line.startswith("WARNING ferryman.audit: authentication_failed: read /v1/agents/x\\n2030-01-01")


def test_the_server_formatter_keeps_every_record_on_its_line() -> None:
    config = uvicorn_options(Settings(), "info")["log_config"]
    formatter = logging.config.DictConfigurator(config).configure_formatter(config["formatters"]["line"])
    assert isinstance(formatter, OneLineFormatter)
    logger = logging.getLogger("ferryman.test_logs")
    try:
        raise ValueError(f"bad value\n{FORGED}")
    except ValueError:
        record = logger.makeRecord(
            logger.name, logging.ERROR, __file__, 1, "turn %s failed", (f"t1\r\n{FORGED}",), None
        )
        record.exc_info = sys.exc_info()
    first, *rest = formatter.format(record).split("\n")
    assert first.endswith(f"ERROR ferryman.test_logs: turn t1\\r\\n{FORGED} failed")
    assert rest and all(line.startswith(CONTINUATION) for line in rest)
    assert rest[-1] == f"{CONTINUATION}{FORGED}"  # the exception's second line, behind the continuation mark
    assert FORMAT in str(config["formatters"]["line"].values())


def test_escaping_twice_changes_nothing_and_spares_printable_text() -> None:
    once = escape("a\nb\u2028c\x00d\\n é ✓")
    assert once == "a\\nb\\u2028c\\x00d\\n é ✓" and escape(once) == once


@pytest.mark.anyio
async def test_a_refused_url_is_logged_and_told_without_its_credentials(caplog: pytest.LogCaptureFixture) -> None:
    url = "http://mallory:hunter2@127.0.0.1:9/doc?token=s3cret#frag"
    with caplog.at_level(logging.WARNING, logger="ferryman.safe_fetch"), pytest.raises(InvalidRequestError) as refused:
        await fetch(url, FetchPolicy(), "documents")
    [record] = [r for r in caplog.records if r.name == "ferryman.safe_fetch"]
    assert "http://127.0.0.1:9/doc" in record.getMessage()
    for secret in ("mallory", "hunter2", "s3cret", "frag"):
        assert secret not in caplog.text and secret not in refused.value.message


def test_a_redacted_url_keeps_scheme_host_port_and_path() -> None:
    assert redacted_url("https://u:p@[::1]:8443/a/b?q=1#f") == "https://[::1]:8443/a/b"
    assert redacted_url("http://h:99999/") == "<invalid URL>"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "url", ["http:mallory:hunter2@127.0.0.1/doc", "mallory:hunter2@127.0.0.1/doc", "ghp_hunter2@example.com/doc"]
)
async def test_a_url_without_slashes_is_told_without_its_user_info(url: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        await fetch(url, FetchPolicy(), "documents")
    assert "127.0.0.1/doc" in refused.value.message or "example.com/doc" in refused.value.message
    assert "hunter2" not in refused.value.message and "hunter2" not in redacted_url(url)
