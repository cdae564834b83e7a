"""``code_interpreter`` on the Responses API: Python in the session's sandbox, and its ``code_interpreter_call`` items.

The container is a session's kernel and scratch directory: a conversation's
responses share its session's (variables and files persist); the responses of a
``previous_response_id`` chain share the session of the chain's first response
(each response of a chain has a session of its own, so the chain is keyed by its
root). Its id is ``cntr_`` and that session's id; a request naming a container by
id may name only its own, which it reaches through records it may read. Deleting
the conversation, or the chain's first response, removes the container.
"""

from __future__ import annotations

import mimetypes
from typing import Any

from ferryman.api.content import ToolCall, ToolResponse
from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.api.response_events import (
    CodeInterpreterCallCodeDelta,
    CodeInterpreterCallCodeDone,
    CodeInterpreterCallCompleted,
    CodeInterpreterCallInProgress,
    CodeInterpreterCallInterpreting,
)
from ferryman.api.responses import (
    CodeInterpreterCallItem,
    CodeInterpreterImage,
    CodeInterpreterLogs,
    CodeInterpreterOutput,
    CodeInterpreterTool,
    HostedCallItem,
    HostedTool,
)
from ferryman.engine.approvals import ApprovalPolicy
from ferryman.errors import InvalidRequestError, NotFoundError
from ferryman.tools.code_interpreter import TOOL_NAME, CodeInterpreter
from ferryman.tools.registry import BoundTool

from ..citations import Source, Sources
from .base import BindContext, Binding, Progress, Replayed, failed, output_text, replayed_call


def container_id(session_id: str) -> str:
    """The id of the container a session's code runs in."""
    return f"cntr_{session_id}"


class CodeInterpreterRenderer:
    """A run of code: its code, then what it printed and drew; the files it wrote are cited by the answer.

    Args:
        container: The container's id.
    """

    item_type = "code_interpreter_call"

    def __init__(self, container: str) -> None:
        self._container = container

    def started(self, call: ToolCall, item_id: str) -> tuple[HostedCallItem, list[Progress]]:
        """An item in progress with the model's code (as one delta), then interpreting."""
        code = call.arguments.get("code") if isinstance(call.arguments, dict) else None
        code = code if isinstance(code, str) else ""
        item = CodeInterpreterCallItem(id=item_id, code=code, container_id=self._container, status="in_progress")
        progress: list[Progress] = [
            (CodeInterpreterCallInProgress, {}),
            (CodeInterpreterCallCodeDelta, {"delta": code}),
            (CodeInterpreterCallCodeDone, {"code": code}),
            (CodeInterpreterCallInterpreting, {}),
        ]
        return item, progress

    def finished(
        self, item: HostedCallItem, response: ToolResponse, sources: Sources
    ) -> tuple[HostedCallItem, list[Progress]]:
        """The run's logs (its error, when it failed), images, and the files it wrote."""
        if failed(response):
            logs = CodeInterpreterLogs(logs=output_text(response))
            return item.model_copy(update={"status": "failed", "outputs": [logs]}), []
        metadata = response.metadata or {}
        outputs: list[CodeInterpreterOutput] = []
        text = _logs(metadata)
        if text:
            outputs.append(CodeInterpreterLogs(logs=text))
        stored = [f for f in metadata.get("files") or [] if isinstance(f, dict) and f.get("file_id")]
        outputs.extend(CodeInterpreterImage(url=_content_url(f["file_id"])) for f in stored if _is_image(f))
        sources.attach([self._written(f) for f in stored])
        completed = item.model_copy(update={"status": "completed", "outputs": outputs})
        return completed, [(CodeInterpreterCallCompleted, {})]

    def _written(self, listed: dict[str, Any]) -> Source:
        return Source(file_id=listed["file_id"], filename=str(listed["filename"]), container_id=self._container)


def _logs(metadata: dict[str, Any]) -> str:
    """What the code printed, then its final expression's value and any error, as one text."""
    parts = [metadata.get(key) for key in ("stdout", "stderr", "result", "error")]
    return "\n".join(str(part).rstrip("\n") for part in parts if part)


def _is_image(listed: dict[str, Any]) -> bool:
    kind, _ = mimetypes.guess_type(str(listed.get("filename") or ""))
    return bool(kind and kind.startswith("image/"))


def _content_url(file_id: str) -> str:
    """Where the caller reads a produced file (the Files API, relative to the server)."""
    return f"/v1/files/{file_id}/content"


def replay_call(item: CodeInterpreterCallItem) -> Replayed:
    """A run as the model read it: its code, then what it printed (its error, when it failed) and drew."""
    call = replayed_call(item.id, item.type, TOOL_NAME, {"code": item.code or ""})
    parts = [
        output.logs if isinstance(output, CodeInterpreterLogs) else f"[image] {output.url}"
        for output in item.outputs or []
    ]
    text = "\n".join(parts)
    if item.status == "failed":
        return Replayed(call, f"error: {text or 'the code failed'}")
    if item.status != "completed":
        return Replayed(call, f"the run ended {item.status}: {text or 'no output'}")
    return Replayed(call, text or "(no output)")


class _InContainer:
    """The interpreter, run in one container's kernel whatever session the turn runs in."""

    def __init__(self, interpreter: CodeInterpreter, session_id: str) -> None:
        self._interpreter = interpreter
        self._session_id = session_id

    @property
    def definition(self) -> Tool:
        """The interpreter's listing."""
        return self._interpreter.definition

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Run the model's code in the container."""
        return await self._interpreter.run(self._session_id, arguments)


class CodeInterpreterKind:
    """The request's ``code_interpreter`` tool, run in the response session's container.

    Args:
        interpreter: The code interpreter over the sandbox.
    """

    names = frozenset({TOOL_NAME})
    uses_prior = False

    def __init__(self, interpreter: CodeInterpreter) -> None:
        self._interpreter = interpreter

    def validate(self, tools: list[HostedTool]) -> None:
        """At most one ``code_interpreter`` tool."""
        if len(tools) > 1:
            raise InvalidRequestError("at most one code_interpreter tool per response", "tools")

    async def check(self, tools: list[HostedTool]) -> None:
        """Nothing to check before the session is known (see :meth:`bind`)."""

    async def bind(self, tools: list[HostedTool], context: BindContext) -> Binding:
        """The interpreter, in the session's container.

        Raises:
            NotFoundError: the tool names a container that is not the response's.
        """
        session = await context.chain_session()
        container = container_id(session)
        binding = Binding()
        for tool in tools:
            assert isinstance(tool, CodeInterpreterTool)
            if isinstance(tool.container, str) and tool.container != container:
                raise NotFoundError(f"container '{tool.container}' not found")
            binding.add(
                TOOL_NAME, BoundTool(_InContainer(self._interpreter, session)), CodeInterpreterRenderer(container)
            )
            if ApprovalPolicy.of(tool.require_approval).requires(TOOL_NAME):
                binding.held[TOOL_NAME] = None
        return binding
