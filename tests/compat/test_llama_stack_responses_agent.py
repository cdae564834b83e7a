"""``llama-stack-client==0.7.5``'s responses-backed ``Agent`` (Python >= 3.12) against a running ferryman.

That client needs a newer Python than the suite's, so the test builds a virtual
environment for it once, from PyPI, under ``.venv-compat/`` (git-ignored; a file
lock keeps two xdist workers from building it at once), and runs
``llama_stack_agent_script.py`` there against the shared ferryman server, which
talks to the scripted model. Without a Python >= 3.12 the test is skipped,
except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from ferryman.testing import ScriptedReply, ScriptedServerClient, ScriptedToolCall

CLIENT = "llama-stack-client"
CLIENT_VERSION = "0.7.5"
MODEL = "scripted-model"
SCRIPT = Path(__file__).with_name("llama_stack_agent_script.py")
VENV = Path(__file__).parents[2] / ".venv-compat" / "ls075"
TOOL_OUTPUT = "Paris: sunny, 21C"
"""What the script's ``get_weather`` client tool returns for Paris."""
BUILD_TIMEOUT = 600
RUN_TIMEOUT = 120


def _is_312_or_newer(python: str) -> bool:
    try:
        probe = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info >= (3, 12))"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0 and probe.stdout.strip() == "True"


def find_python() -> str | None:
    """A Python >= 3.12: on ``PATH`` first, then under pyenv's versions."""
    names = [f"python3.{minor}" for minor in range(19, 11, -1)] + ["python3", "python"]
    on_path = [found for name in names if (found := shutil.which(name))]
    under_pyenv = sorted(glob.glob("/root/.pyenv/versions/3.1[2-9]*/bin/python"), reverse=True)
    return next((python for python in [*on_path, *under_pyenv] if _is_312_or_newer(python)), None)


def _installed_version(venv: Path) -> str | None:
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


def build_client_venv(python: str, venv: Path) -> Path:
    """The venv's interpreter, the client installed from PyPI; built once, reused while its version is right."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(venv.with_suffix(".lock")), timeout=BUILD_TIMEOUT):
        if _installed_version(venv) != CLIENT_VERSION:
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=BUILD_TIMEOUT)
            subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{CLIENT}=={CLIENT_VERSION}"],
                check=True,
                timeout=BUILD_TIMEOUT,
                env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
            )
    return venv / "bin" / "python"


@pytest.fixture(scope="session")
def client_python() -> Iterator[Path]:
    """The interpreter of the ``llama-stack-client==0.7.5`` venv."""
    python = find_python()
    if python is None:
        message = "no Python >= 3.12 (on PATH or under /root/.pyenv/versions) to run llama-stack-client 0.7.5"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    yield build_client_venv(python, VENV)


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
