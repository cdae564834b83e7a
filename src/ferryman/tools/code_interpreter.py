"""``builtin::code_interpreter``: Python run in the session's confined kernel, its files returned as uploads."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ferryman.api.content import ToolParameter
from ferryman.api.files import FileObject
from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.errors import FerrymanError
from ferryman.sandbox import ProducedFile, RunOutcome, Sandbox, SandboxUnavailable

from .context import tool_context

log = logging.getLogger(__name__)

TOOLGROUP_ID = "builtin::code_interpreter"
TOOL_NAME = "code_interpreter"
FILE_PURPOSE = "assistants"


class FileSink(Protocol):
    """Where produced files go (the files service, as the caller)."""

    async def upload(self, filename: str, data: bytes, purpose: str) -> FileObject:
        """Store a file; return it as listed."""
        ...


_DEFINITION = Tool(
    identifier=TOOL_NAME,
    toolgroup_id=TOOLGROUP_ID,
    description=(
        "Run Python 3 code in a sandbox without network access. Variables, imports and files in the "
        "working directory persist between calls in this session. The value of a final expression is "
        "returned; use print() for anything else. Files written to the working directory are returned."
    ),
    parameters=[ToolParameter(name="code", parameter_type="string", description="The Python code to run")],
)


class CodeInterpreter:
    """Runs the model's Python in the sandbox; variables persist within a session.

    The result's ``metadata`` carries ``stdout``, ``stderr``, ``result``,
    ``error``, ``restarted`` and ``files``: one ``{file_id, filename, bytes, path}``
    per file the code wrote or changed in its working directory, stored as a
    file of purpose ``assistants`` (owned by the caller).

    Args:
        sandbox: The kernels.
        files: Where produced files are stored (None: they are listed by path only).
    """

    def __init__(self, sandbox: Sandbox, files: FileSink | None = None) -> None:
        self._sandbox = sandbox
        self._files = files

    @property
    def definition(self) -> Tool:
        """The tool's listing."""
        return _DEFINITION

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Run ``arguments['code']`` in the current session's kernel."""
        return await self.run(tool_context.get().session_id, arguments)

    async def run(self, session_id: str | None, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Run ``arguments['code']`` in the kernel kept under ``session_id`` (None: a kernel of its own)."""
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return ToolInvocationResult(error_message="missing string argument 'code'", error_code=400)
        try:
            outcome = await self._sandbox.run(session_id, code)
        except SandboxUnavailable as exc:
            return ToolInvocationResult(error_message=str(exc), error_code=503)
        stored = [await self._store(produced) for produced in outcome.files]
        execution = outcome.execution
        metadata: dict[str, Any] = {
            "stdout": execution.stdout,
            "stderr": execution.stderr,
            "result": execution.result,
            "error": execution.error,
            "restarted": outcome.restarted,
            "files": stored,
        }
        if execution.killed:
            message = f"{execution.killed}; the session's variables were lost (the next call starts afresh)"
            return ToolInvocationResult(error_message=message, error_code=408, metadata=metadata)
        return ToolInvocationResult(content=_text(outcome, stored), metadata=metadata)

    async def _store(self, produced: ProducedFile) -> dict[str, Any]:
        listed: dict[str, Any] = {"file_id": None, "filename": produced.path, "bytes": len(produced.data)}
        if self._files is not None:
            try:
                uploaded = await self._files.upload(produced.path, produced.data, FILE_PURPOSE)
            except FerrymanError as exc:  # too large, a name the store refuses: listed, not stored
                log.info("a file the code wrote was not stored: %s", exc.message)
            else:
                listed.update(file_id=uploaded.id, filename=uploaded.filename)
        return {**listed, "path": produced.path}


def _text(outcome: RunOutcome, stored: list[dict[str, Any]]) -> str:
    """The result as the model reads it."""
    execution = outcome.execution
    parts: list[str] = []
    if outcome.restarted:
        parts.append("[note] the kernel was restarted: variables from earlier calls are gone")
    for label, value in (
        ("stdout", execution.stdout),
        ("stderr", execution.stderr),
        ("result", execution.result),
        ("error", execution.error),
    ):
        if value:
            parts.append(f"[{label}]\n{value.rstrip()}")
    if stored:
        listing = "\n".join(f"{f['path']} ({f['bytes']} bytes, {f['file_id'] or 'not stored'})" for f in stored)
        parts.append(f"[files]\n{listing}")
    return "\n".join(parts) or "(no output)"
