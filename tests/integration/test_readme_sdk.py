"""The README's Python SDK quick start, run as written against a ``ferryman serve`` process and its scripted model."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ferryman.testing import ScriptedError, ScriptedReply, ScriptedServerClient

README = Path(__file__).parents[2] / "README.md"


def sdk_snippet() -> str:
    """The first Python block of the README's "## Python SDK" section."""
    section = README.read_text().split("\n## Python SDK\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the Python SDK section has no python block"
    return match.group(1)


def runnable_snippet() -> str:
    """The quick start, on the scripted model."""
    code = sdk_snippet()
    model_line = 'MODEL = "qwen2.5-1.5b-instruct-q4_k_m"'
    assert model_line in code
    return code.replace(model_line, 'MODEL = "scripted-model"')


def test_the_quick_start_runs_its_client_tool_and_prints_the_answer(
    served_base_url: str,
    served_model: ScriptedServerClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FERRYMAN_URL", served_base_url)
    monkeypatch.delenv("FERRYMAN_API_KEY", raising=False)
    served_model.enqueue_tool_call("get_weather", {"city": "Paris"})
    served_model.enqueue_text("It is sunny in Paris.")
    exec(compile(runnable_snippet(), str(README), "exec"), {"__name__": "readme"})  # noqa: S102
    printed = capsys.readouterr().out
    assert "→ get_weather(city='Paris')" in printed
    assert "← get_weather: Paris: sunny, 21°C" in printed
    assert printed.rstrip().endswith("answer: It is sunny in Paris.")
    tool_messages = [m["content"] for m in served_model.requests()[1]["messages"] if m["role"] == "tool"]
    assert tool_messages == ["Paris: sunny, 21°C"]


def test_the_quick_start_exits_non_zero_when_its_turn_fails(
    served_base_url: str, served_model: ScriptedServerClient
) -> None:
    served_model.enqueue(ScriptedReply(error=ScriptedError(status_code=400, message="the model refused")))
    env = {**os.environ, "FERRYMAN_URL": served_base_url}
    env.pop("FERRYMAN_API_KEY", None)
    ran = subprocess.run(  # noqa: S603  (this interpreter, the README's code)
        [sys.executable, "-c", runnable_snippet()], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 1, ran.stderr
    assert "✗ turn failed upstream_error: " in ran.stdout  # EventLogger printed the failure first
    assert "answer:" not in ran.stdout
    assert "ferryman.client.errors.TurnFailedError: upstream_error: " in ran.stderr
