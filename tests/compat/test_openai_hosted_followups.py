"""What later responses know of earlier hosted tool calls, and where a code interpreter's container lives.

A response that continues a conversation reads the earlier ``mcp_call`` and
``code_interpreter_call`` items as the tool calls and outputs they were; a
``previous_response_id`` chain shares its first response's container; deleting
the conversation or that first response removes the container; the Responses
``mcp`` tool's ``allowed_tools.read_only`` offers only tools the server marks read-only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from hosted_support import sdk, served_locally
from openai.types.responses import ResponseCodeInterpreterToolCall

from ferryman.sandbox import Sandbox
from ferryman.sandbox_settings import SandboxSettings
from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import Served, check_script
from mcp_servers import RunningServer

MODEL = "scripted-model"
CODE: Any = {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Ferryman with a sandbox, allowed to reach the test MCP servers, for this module."""
    home = tmp_path_factory.mktemp("followups")
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


def _containers(model: Served) -> set[str]:
    assert model.services.sandbox is not None
    root = Path(model.services.sandbox.settings.directory())
    # Beside each scratch directory: its lock file and, as root, its kernel's /tmp ("<key>.lock", "<key>.tmp").
    return {folder.name for folder in root.iterdir() if "." not in folder.name} if root.is_dir() else set()


def _run(code: str, answer: str) -> list[ScriptedReply]:
    return [
        ScriptedReply(tool_calls=[ScriptedToolCall(name="code_interpreter", arguments={"code": code})]),
        ScriptedReply(text=answer),
    ]


def _tool_exchange(request: dict[str, Any], name: str) -> tuple[dict[str, Any], str]:
    """The model's call of ``name`` in a prompt, and the tool output it was answered with."""
    messages = request["messages"]
    calls = [call for m in messages if m["role"] == "assistant" for call in m.get("tool_calls") or []]
    call = next(call for call in calls if call["function"]["name"] == name)
    output = next(m["content"] for m in messages if m["role"] == "tool" and m["tool_call_id"] == call["id"])
    return call, output


def test_a_follow_up_reads_the_earlier_mcp_call(
    oai: openai.OpenAI, model: Served, mcp_http_server: RunningServer
) -> None:
    tool: Any = {"type": "mcp", "server_label": "calc", "server_url": mcp_http_server.url, "require_approval": "never"}
    conversation = oai.conversations.create()
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 20, "b": 22})]),
        ScriptedReply(text="It is 42."),
        ScriptedReply(text="I added 20 and 22."),
    )

    oai.responses.create(model=MODEL, input="20 + 22?", tools=[tool], conversation=conversation.id)
    oai.responses.create(model=MODEL, input="What did you add?", conversation=conversation.id)

    call, output = _tool_exchange(model.requests()[2], "add")
    assert call["function"]["arguments"] == '{"a": 20, "b": 22}' and output == "42"


def test_a_follow_up_reads_the_earlier_run(oai: openai.OpenAI, model: Served) -> None:
    conversation = oai.conversations.create()
    model.enqueue(*_run("print(6 * 7)", "It is 42."), ScriptedReply(text="It printed 42."))

    oai.responses.create(model=MODEL, input="6 * 7?", tools=[CODE], conversation=conversation.id)
    oai.responses.create(model=MODEL, input="What did it print?", conversation=conversation.id)

    call, output = _tool_exchange(model.requests()[2], "code_interpreter")
    assert "print(6 * 7)" in call["function"]["arguments"] and output.strip() == "42"


def test_a_chain_shares_its_first_responses_container_until_it_is_deleted(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue(*_run("x = 5", "Set."), ScriptedReply(text="Noted."), *_run("print(x + 1)", "Six."))
    before = _containers(model)

    first = oai.responses.create(model=MODEL, input="Set x", tools=[CODE])
    second = oai.responses.create(model=MODEL, input="Fine", previous_response_id=first.id)
    container = first.output[0].container_id  # type: ignore[union-attr]
    third = oai.responses.create(
        model=MODEL,
        input="x + 1?",
        tools=[{"type": "code_interpreter", "container": container}],
        previous_response_id=second.id,
    )

    call = third.output[0]
    assert isinstance(call, ResponseCodeInterpreterToolCall) and call.container_id == container
    assert call.outputs and "6" in call.outputs[0].logs  # type: ignore[union-attr]
    created = _containers(model) - before
    assert len(created) == 1
    oai.responses.delete(second.id)
    assert created <= _containers(model)  # a later response of the chain holds no container
    oai.responses.delete(first.id)
    assert not created & _containers(model)


def test_deleting_a_conversation_removes_its_container(oai: openai.OpenAI, model: Served) -> None:
    conversation = oai.conversations.create()
    model.enqueue(*_run("open('notes.txt', 'w').write('kept')", "Written."))
    before = _containers(model)

    oai.responses.create(model=MODEL, input="Write notes", tools=[CODE], conversation=conversation.id)
    created = _containers(model) - before
    oai.conversations.delete(conversation.id)

    assert len(created) == 1 and not created & _containers(model)


def test_read_only_offers_only_the_tools_the_server_marks_read_only(
    oai: openai.OpenAI, model: Served, mcp_http_server: RunningServer
) -> None:
    tool: Any = {
        "type": "mcp",
        "server_label": "calc",
        "server_url": mcp_http_server.url,
        "require_approval": "never",
        "allowed_tools": {"read_only": True},
    }
    model.enqueue(ScriptedReply(text="Only add."))

    response = oai.responses.create(model=MODEL, input="Which tools?", tools=[tool])

    listing = response.output[0]
    assert listing.type == "mcp_list_tools"
    assert {t.name: t.annotations for t in listing.tools}["add"] == {"readOnlyHint": True}
    assert [t["function"]["name"] for t in model.requests()[0]["tools"]] == ["add"]
