"""``llama-stack-client==0.7.5``'s responses-backed ``Agent`` (Python >= 3.12) against a running ferryman.

That client needs a newer Python than the suite's, so it has a virtual
environment of its own, ``.venv-compat/ls075`` (git-ignored), which the install
step builds (``.ci/install-compat-clients``, from
``requirements/compat-llama-stack-client.txt``; nothing is downloaded while the
tests run). The test runs ``llama_stack_agent_script.py`` there against the
shared ferryman server, which talks to the scripted model. Without that
environment the test is skipped, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ferryman.testing import ScriptedReply, ScriptedServerClient, ScriptedToolCall

ROOT = Path(__file__).parents[2]
REQUIREMENTS = ROOT / "requirements" / "compat-llama-stack-client.txt"
CLIENT = "llama-stack-client"
MODEL = "scripted-model"
SCRIPT = Path(__file__).with_name("llama_stack_agent_script.py")
VENV = ROOT / ".venv-compat" / "ls075"
TOOL_OUTPUT = "Paris: sunny, 21C"
"""What the script's ``get_weather`` client tool returns for Paris."""
RUN_TIMEOUT = 120


def pinned_version() -> str:
    """The client's version that ``REQUIREMENTS`` pins (the one the install step put in the venv)."""
    pin = re.search(rf"^{CLIENT}==(\S+)", REQUIREMENTS.read_text(), re.MULTILINE)
    assert pin is not None, f"{REQUIREMENTS} pins no {CLIENT}"
    return pin.group(1)


def installed_version(venv: Path) -> str | None:
    """The client's version in ``venv``, or None when the venv or the client is missing."""
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({CLIENT!r}))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


@pytest.fixture(scope="session")
def client_python() -> Path:
    """The interpreter of the ``llama-stack-client==0.7.5`` venv the install step built."""
    found, pinned = installed_version(VENV), pinned_version()
    if found != pinned:
        message = (
            f"{VENV} holds {CLIENT} {found or 'nothing'}, not {pinned}: "
            "run `bash .ci/install-compat-clients` (it needs a Python >= 3.12 on PATH or in pyenv)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return VENV / "bin" / "python"


def run_agent_script(python: Path, base_url: str) -> dict[str, Any]:
    """Run two ``Agent`` turns in one session; what the script saw."""
    done = subprocess.run(
        [str(python), str(SCRIPT), base_url, MODEL], capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def shape(events: list[dict[str, Any]]) -> list[str]:
    """Each event's class, with its step type where it has one: ``StepStarted(inference)``."""
    return [f"{e['class']}({e['step_type']})" if "step_type" in e else e["class"] for e in events]


def messages_sent(request: dict[str, Any]) -> list[tuple[str, str]]:
    """``(role, content)`` of each message ferryman sent the model."""
    return [(m["role"], m.get("content") or "") for m in request["messages"]]


def test_agent_runs_its_client_tool_and_the_next_turn_sees_the_first(
    client_python: Path, served_base_url: str, served_model: ScriptedServerClient
) -> None:
    """A streamed turn calls the ``@client_tool`` and answers from its result; a second turn has the first's history.

    Llama Stack's client drops an item event without ``response_id``, which
    made the ``Agent`` skip its tool and end the turn with empty text.
    """
    served_model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Paris"})]),
        ScriptedReply(text=f"The tool says: {TOOL_OUTPUT}."),
        ScriptedReply(text="Tomorrow will be sunny too."),
    )
    seen = run_agent_script(client_python, served_base_url)

    assert seen["tool_runs"] == [{"city": "Paris"}]
    first, second = seen["turns"]
    steps = shape(first)
    assert steps[:2] == ["TurnStarted", "StepStarted(inference)"]
    assert steps.index("StepStarted(tool_execution)") < steps.index("StepStarted(inference)", 2)
    assert steps[-1] == "TurnCompleted"
    assert TOOL_OUTPUT in first[-1]["final_text"]
    assert shape(second)[0] == "TurnStarted" and second[-1]["final_text"] == "Tomorrow will be sunny too."

    answer_request, second_turn_request = served_model.requests()[1:]
    assert any(role == "tool" and TOOL_OUTPUT in content for role, content in messages_sent(answer_request))
    history = messages_sent(second_turn_request)
    assert ("user", "What is the weather in Paris?") in history
    assert ("assistant", f"The tool says: {TOOL_OUTPUT}.") in history
    assert history[-1] == ("user", "And tomorrow?")
    assert seen["schema_errors"] == []
