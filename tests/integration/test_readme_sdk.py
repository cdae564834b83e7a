"""The README's Python SDK quick start, run as written against a ``ferryman serve`` process and its scripted model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ferryman.testing import ScriptedServerClient

README = Path(__file__).parents[2] / "README.md"


def sdk_snippet() -> str:
    """The first Python block of the README's "## Python SDK" section."""
    section = README.read_text().split("\n## Python SDK\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the Python SDK section has no python block"
    return match.group(1)


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
    code = sdk_snippet()
    model_line = 'MODEL = "qwen2.5-1.5b-instruct-q4_k_m"'
    assert model_line in code
    runnable = code.replace(model_line, 'MODEL = "scripted-model"')
    exec(compile(runnable, str(README), "exec"), {"__name__": "readme"})  # noqa: S102
    printed = capsys.readouterr().out
    assert "→ get_weather(city='Paris')" in printed
    assert "← get_weather: Paris: sunny, 21°C" in printed
    assert printed.rstrip().endswith("answer: It is sunny in Paris.")
    tool_messages = [m["content"] for m in served_model.requests()[1]["messages"] if m["role"] == "tool"]
    assert tool_messages == ["Paris: sunny, 21°C"]
