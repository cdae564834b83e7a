"""The Responses ``code_interpreter`` tool with the real ``openai`` SDK, on the bubblewrap sandbox.

Its ``code_interpreter_call`` items and stream events parse, the logs and the
files the code wrote come back, and a conversation keeps one container.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hosted_support import sdk, served_locally
from openai.types.responses import ResponseCodeInterpreterToolCall, ResponseOutputMessage
from openai.types.responses.response_code_interpreter_tool_call import OutputLogs

from ferryman.sandbox import Sandbox
from ferryman.sandbox_settings import SandboxSettings
from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import Served, check_script

MODEL = "scripted-model"
TOOL: Any = {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Ferryman with a sandbox, for this module."""
    home = tmp_path_factory.mktemp("code")
    sandbox = Sandbox(SandboxSettings(dir=str(home / "sandbox"), cpu_seconds=2, wall_seconds=10))
    assert sandbox.unavailable is None, sandbox.unavailable
    with served_locally(home / "ferryman.db", sandbox) as server:
        yield server


@pytest.fixture()
def model(local_server: Served, request: pytest.FixtureRequest) -> Iterator[Served]:
    """The scripted model, emptied before each test and checked after it."""
    local_server.reset()
    yield local_server
    check_script(request, local_server.script)


@pytest.fixture()
def oai(model: Served) -> Iterator[openai.OpenAI]:
    """The SDK on the local server."""
    with sdk(model) as client:
        yield client


def _run(code: str, answer: str) -> list[ScriptedReply]:
    return [
        ScriptedReply(tool_calls=[ScriptedToolCall(name="code_interpreter", arguments={"code": code})]),
        ScriptedReply(text=answer),
    ]


def test_the_sdk_reads_the_run_its_logs_and_the_file_it_wrote(oai: openai.OpenAI, model: Served) -> None:
    code = "print(6 * 7)\nopen('answer.txt', 'w').write('42')"
    model.enqueue(*_run(code, "It is 42."))

    response = oai.responses.create(model=MODEL, input="6 * 7?", tools=[TOOL])

    call, message = response.output
    assert isinstance(call, ResponseCodeInterpreterToolCall)
    assert call.status == "completed" and call.code == code and call.container_id.startswith("cntr_")
    assert call.outputs and isinstance(call.outputs[0], OutputLogs) and "42" in call.outputs[0].logs
    assert isinstance(message, ResponseOutputMessage)
    (cited,) = message.content[0].annotations  # type: ignore[union-attr]
    assert cited.type == "container_file_citation" and cited.filename == "answer.txt"
    assert cited.container_id == call.container_id
    assert oai.files.content(cited.file_id).text == "42"
    tool_message = next(m for m in model.requests()[1]["messages"] if m["role"] == "tool")
    assert "42" in tool_message["content"]


def test_the_sdk_streams_the_run(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue(*_run("print('ahoy')", "ahoy"))

    events = list(oai.responses.create(model=MODEL, input="Say ahoy", tools=[TOOL], stream=True))
    types = [event.type for event in events]

    assert [e.sequence_number for e in events] == list(range(len(events)))
    order = [
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.output_text.delta",
        "response.completed",
    ]
    assert [types.index(kind) for kind in order] == sorted(types.index(kind) for kind in order)
    done = next(e for e in events if e.type == "response.code_interpreter_call_code.done")
    assert done.code == "print('ahoy')"  # type: ignore[union-attr]


def test_a_conversation_keeps_its_container(oai: openai.OpenAI, model: Served) -> None:
    conversation = oai.conversations.create()
    model.enqueue(*_run("x = 5", "Set."), *_run("print(x + 1)", "Six."))

    first = oai.responses.create(model=MODEL, input="Set x", tools=[TOOL], conversation=conversation.id)
    container = first.output[0].container_id  # type: ignore[union-attr]
    second = oai.responses.create(
        model=MODEL,
        input="x + 1?",
        tools=[{"type": "code_interpreter", "container": container}],
        conversation=conversation.id,
    )

    call = second.output[0]
    assert isinstance(call, ResponseCodeInterpreterToolCall) and call.container_id == container
    assert call.outputs and "6" in call.outputs[0].logs  # type: ignore[union-attr]


def test_a_container_of_another_session_is_not_found(oai: openai.OpenAI) -> None:
    tool = {"type": "code_interpreter", "container": "cntr_someone-else"}
    with pytest.raises(openai.NotFoundError):
        oai.responses.create(model=MODEL, input="Hi", tools=[tool])  # type: ignore[list-item]


def test_a_failing_run_is_a_failed_item_the_model_sees(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue(*_run("while True:\n    pass", "It ran too long."))

    response = oai.responses.create(model=MODEL, input="Loop", tools=[TOOL])

    call = response.output[0]
    assert response.status == "completed"
    assert isinstance(call, ResponseCodeInterpreterToolCall) and call.status == "failed"
    assert call.outputs and call.outputs[0].logs.startswith("error: ")  # type: ignore[union-attr]
