"""Running ``ferryman`` commands in this process, against a real server, and reading what they printed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from ferryman.cli.main import main


@dataclass
class Ran:
    """What one command did: its exit code and what it printed."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """Stdout as the one JSON document ``--json`` promises (fails the test otherwise)."""
        assert self.code == 0, self.err
        return json.loads(self.out)


def cli(capsys: pytest.CaptureFixture[str], base_url: str, *argv: str) -> Ran:
    """Run ``ferryman ARGV --url BASE_URL`` in this process."""
    capsys.readouterr()
    code = main([*argv, "--url", base_url])
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err)
