"""``--log-format``: text lines or JSON objects, one per record, with the context's fields and no secret field."""

from __future__ import annotations

import json
import logging
import logging.config
import sys
from pathlib import Path

import pytest

from ferryman.cli.serve import uvicorn_options
from ferryman.config import Settings, load_settings
from ferryman.errors import ConfigurationError
from ferryman.logs import (
    FORMAT,
    REDACTED,
    ContextFilter,
    JsonFormatter,
    OneLineFormatter,
    current_request_id,
    log_fields,
)

FORGED = '"}\n{"level":"INFO","message":"forged'


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.getLogger("ferryman.test").makeRecord(
        "ferryman.test", logging.WARNING, __file__, 1, message, args, None, extra=extra or None
    )
    ContextFilter().filter(record)
    return record


def _configured_formatter(settings: Settings) -> logging.Formatter:
    config = uvicorn_options(settings, "info")["log_config"]
    formatter = logging.config.DictConfigurator(config).configure_formatter(config["formatters"]["line"])
    assert isinstance(formatter, logging.Formatter)
    return formatter


def test_a_json_record_is_one_line_whose_values_come_back_as_they_were() -> None:
    value = f"a{FORGED}\x1b[2J\u2028\x85\x7f é"
    record = _record("tool %s failed", value, tool=value, count=3, ratio=0.5, tags=["x"], missing=None)
    line = JsonFormatter().format(record)
    assert "\n" not in line and "\x1b" not in line and "\u2028" not in line and "\x85" not in line
    assert "\x7f" not in line and "é" in line
    data = json.loads(line)
    assert data["message"] == f"tool {value} failed" and data["tool"] == value
    assert (data["count"], data["ratio"], data["tags"], data["missing"]) == (3, 0.5, ["x"], None)
    assert (data["level"], data["logger"]) == ("WARNING", "ferryman.test")
    assert data["time"].endswith("+00:00")


def test_a_json_record_carries_its_traceback_as_one_value() -> None:
    try:
        raise ValueError(f"bad\n{FORGED}")
    except ValueError:
        record = _record("turn failed")
        record.exc_info = sys.exc_info()
    line = JsonFormatter().format(record)
    assert "\n" not in line
    exception = json.loads(line)["exception"]
    assert exception.startswith("Traceback") and exception.endswith(f"ValueError: bad\n{FORGED}")


def test_fields_named_like_secrets_are_never_written() -> None:
    secrets = {
        "authorization": "Bearer fm_hunter2",
        "api_key": "sk-hunter2",
        "x_api_key": "k-hunter2",
        "access_token": "tok-hunter2",
        "password": "hunter2",
        "cookie": "sid=hunter2",
    }
    record = _record("called", **secrets, input_tokens=12, tokens_left=3)
    line = JsonFormatter().format(record)
    assert "hunter2" not in line
    data = json.loads(line)
    assert all(data[name] == REDACTED for name in secrets)
    assert (data["input_tokens"], data["tokens_left"]) == (12, 3)  # counts of tokens are no tokens


def test_the_context_names_every_record_in_both_formats() -> None:
    named = current_request_id.set("req-7")
    try:
        with log_fields(turn_id="t1", agent_id=None), log_fields(session_id="s1"):
            record = _record("turn %s", "started")
    finally:
        current_request_id.reset(named)
    data = json.loads(JsonFormatter().format(record))
    assert (data["request_id"], data["turn_id"], data["session_id"]) == ("req-7", "t1", "s1")
    assert "agent_id" not in data and "context_fields" not in data
    line = OneLineFormatter(FORMAT).format(record)
    assert line.endswith("ferryman.test: turn started [request_id=req-7 turn_id=t1 session_id=s1]")


def test_a_field_the_record_has_wins_over_the_context() -> None:
    named = current_request_id.set("req-outer")
    try:
        with log_fields(turn_id="t-outer"):
            record = _record("audited", request_id="req-own", turn_id="t-own")
    finally:
        current_request_id.reset(named)
    data = json.loads(JsonFormatter().format(record))
    assert (data["request_id"], data["turn_id"]) == ("req-own", "t-own")


def test_outside_a_request_a_text_line_ends_with_its_message() -> None:
    line = OneLineFormatter(FORMAT).format(_record("started"))
    assert line.endswith("WARNING ferryman.test: started")
    assert json.loads(JsonFormatter().format(_record("started")))["request_id"] is None


def test_the_server_logs_in_the_format_the_settings_name(tmp_path: Path) -> None:
    assert isinstance(_configured_formatter(Settings()), OneLineFormatter)
    config = tmp_path / "config.yaml"
    config.write_text("server:\n  log_format: json\n")
    settings = load_settings(str(config))
    assert settings.log_format == "json"
    assert isinstance(_configured_formatter(settings), JsonFormatter)
    config.write_text("server:\n  log_format: xml\n")
    with pytest.raises(ConfigurationError, match="log_format"):
        load_settings(str(config))
