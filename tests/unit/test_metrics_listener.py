"""The metrics' own address (``telemetry.metrics_address``) and the directory ``--workers`` share them through."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from ferryman.config import Settings
from ferryman.errors import ConfigurationError
from ferryman.metrics.listener import metrics_listener, serving_metrics
from ferryman.metrics.multiprocess import MULTIPROC_ENV, shared_metrics
from ferryman.server.metrics_routes import metrics_served
from ferryman.telemetry_settings import TelemetrySettings, split_address
from support import free_port


def test_metrics_are_on_by_default_and_served_at_the_api_unless_an_address_or_off_says_otherwise() -> None:
    assert metrics_served(Settings().telemetry) == "here"
    assert metrics_served(TelemetrySettings(metrics_address="127.0.0.1:9464")) == "elsewhere"
    assert metrics_served(TelemetrySettings(metrics=False, metrics_address="127.0.0.1:9464")) == "off"


@pytest.mark.parametrize("address", ["9464", "localhost", "localhost:0", "host:99999", "::1:9464", ":9464"])
def test_a_metrics_address_is_host_and_port(address: str) -> None:
    with pytest.raises(ValidationError, match="metrics_address"):
        Settings.model_validate({"telemetry": {"metrics_address": address}})


def test_an_ipv6_metrics_address_is_bracketed() -> None:
    assert split_address("[::1]:9464") == ("::1", 9464)
    assert split_address("0.0.0.0:9464") == ("0.0.0.0", 9464)


def test_the_listener_serves_this_process_metrics_and_stops_with_its_block() -> None:
    address = f"127.0.0.1:{free_port()}"
    with metrics_listener(address):
        scraped = httpx.get(f"http://{address}/metrics", timeout=10)
    assert scraped.status_code == 200
    assert "# TYPE ferryman_turns_total counter" in scraped.text
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://{address}/metrics", timeout=10)


def test_an_address_in_use_is_a_configuration_error_naming_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with (
            pytest.raises(ConfigurationError, match="telemetry.metrics_address"),
            metrics_listener(f"127.0.0.1:{port}"),
        ):
            pass


def test_workers_share_a_fresh_directory_removed_after_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    with shared_metrics() as directory:
        assert os.environ[MULTIPROC_ENV] == str(directory)
        assert directory.is_dir() and not list(directory.iterdir())
    assert MULTIPROC_ENV not in os.environ
    assert not directory.exists()


def test_an_operators_directory_is_emptied_of_an_earlier_run_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    (tmp_path / "counter_12345.db").write_bytes(b"stale")
    with shared_metrics() as directory:
        assert directory == tmp_path and not list(tmp_path.glob("*.db"))
    assert os.environ[MULTIPROC_ENV] == str(tmp_path) and tmp_path.is_dir()


def test_one_process_shares_no_directory_and_metrics_off_make_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    with serving_metrics(TelemetrySettings(), workers=1):
        assert MULTIPROC_ENV not in os.environ
    with serving_metrics(TelemetrySettings(metrics=False), workers=4):
        assert MULTIPROC_ENV not in os.environ
    with serving_metrics(TelemetrySettings(), workers=2):
        assert MULTIPROC_ENV in os.environ
