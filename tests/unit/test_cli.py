"""``ferryman serve`` refuses clearly when it has no way to answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferryman.cli import main as cli


def test_serve_without_provider_or_embedded_model_exits_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "embedded_available", lambda: (False, "llama-cpp-python is not installed"))
    assert cli.main(["serve", "--db", str(tmp_path / "x.db")]) == 2
    message = capsys.readouterr().err
    assert "pip install -e '.[local]'" in message and "--inference-url" in message
    assert "llama-cpp-python is not installed" in message
