"""Client tools: Python functions the model may call, run by the agent in the caller's process.

``@client_tool`` reads a function's signature and docstring (Google, Sphinx/reST
or NumPy style, parsed by ``docstring_parser``) into a tool definition whose
parameters are a JSON schema; pydantic models are valid parameter types. When
the model calls the tool, its arguments are validated and converted to the
annotated types before the function runs; whatever goes wrong (bad arguments,
an exception in the tool) becomes an error message for the model, so the
turn goes on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, cast, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ferryman.api.content import ToolCall, ToolDef, ToolParameter, ToolResponse
from ferryman.api.responses import FunctionTool

_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object"}


class ClientTool:
    """A function offered to the model as a tool, with its definition.

    Calling the object calls the function itself, unchanged.

    Attributes:
        name: The tool's name as the model sees it.
        description: What the tool does.
        input_schema: The JSON schema of its arguments (an object).
    """

    def __init__(self, func: Callable[..., Any], name: str | None = None, description: str | None = None) -> None:
        """Describe ``func`` as a tool.

        Args:
            func: The function (plain or ``async``); every parameter needs a type hint.
            name: The tool's name; the function's name by default.
            description: What the tool does; the docstring's description by default.

        Raises:
            TypeError: A parameter has no type hint, or is ``*args``/``**kwargs``.
        """
        # Imported here: the rest of the client imports with httpx, httpx-sse and pydantic alone.
        import docstring_parser

        self.func = func
        self.name = name or func.__name__
        doc = docstring_parser.parse(inspect.getdoc(func) or "")
        summary = "\n\n".join(part for part in (doc.short_description, doc.long_description) if part)
        self.description = description or summary
        self._arguments = _arguments_model(func, {p.arg_name: p.description or "" for p in doc.params})
        self.input_schema: dict[str, Any] = self._arguments.model_json_schema()
        self.input_schema.pop("title", None)
        self.is_async = inspect.iscoroutinefunction(func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function itself."""
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"ClientTool({self.name!r})"

    def tool_def(self) -> ToolDef:
        """The definition the Agents API takes in ``client_tools``."""
        return ToolDef(
            name=self.name,
            description=self.description,
            parameters=_flat_parameters(self.input_schema),
            input_schema=self.input_schema,
        )

    def function_tool(self) -> FunctionTool:
        """The definition the Responses API takes in ``tools``."""
        return FunctionTool(name=self.name, description=self.description, parameters=self.input_schema)

    def arguments(self, raw: dict[str, Any] | str) -> dict[str, Any]:
        """The model's arguments validated and converted to the parameters' types.

        Raises:
            ValueError: The arguments are not a JSON object, or do not fit the parameters.
        """
        values = json.loads(raw or "{}") if isinstance(raw, str) else raw
        if not isinstance(values, dict):
            raise ValueError("the arguments are not a JSON object")
        parsed = self._arguments.model_validate(values)
        return {field: getattr(parsed, field) for field in type(parsed).model_fields}

    def run(self, call: ToolCall) -> ToolResponse:
        """Run the tool for one call of the model, blocking; an ``async`` tool runs on an event loop of its own."""
        try:
            kwargs = self.arguments(call.arguments)
            if self.is_async:
                value = run_blocking(cast(Callable[..., Coroutine[Any, Any, Any]], self.func)(**kwargs))
            else:
                value = self.func(**kwargs)
        except Exception as exc:  # noqa: BLE001  (any failure of the caller's tool is reported to the model)
            return error_response(call, exc)
        return _response(call, value)

    async def arun(self, call: ToolCall) -> ToolResponse:
        """Run the tool for one call of the model; a plain function runs in a worker thread."""
        try:
            kwargs = self.arguments(call.arguments)
            if self.is_async:
                value = await cast(Callable[..., Awaitable[Any]], self.func)(**kwargs)
            else:
                value = await asyncio.to_thread(self.func, **kwargs)
        except Exception as exc:  # noqa: BLE001  (any failure of the caller's tool is reported to the model)
            return error_response(call, exc)
        return _response(call, value)


@overload
def client_tool(func: Callable[..., Any], /) -> ClientTool: ...


@overload
def client_tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], ClientTool]: ...


def client_tool(
    func: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None
) -> ClientTool | Callable[[Callable[..., Any]], ClientTool]:
    """Make a function a client tool: ``@client_tool`` or ``@client_tool(name=..., description=...)``.

    Args:
        func: The function, when used without arguments.
        name: The tool's name (the function's name by default).
        description: What the tool does (the docstring's description by default).

    Returns:
        The :class:`ClientTool`, or a decorator making one.
    """
    if func is not None:
        return ClientTool(func, name, description)
    return lambda f: ClientTool(f, name, description)


def error_response(call: ToolCall, exc: BaseException | str) -> ToolResponse:
    """What the model is told when a tool call could not run."""
    if isinstance(exc, ValidationError):
        detail = f"invalid arguments: {exc.errors(include_url=False, include_context=False)}"
    elif isinstance(exc, BaseException):
        detail = f"{type(exc).__name__}: {exc}"
    else:
        detail = exc
    return ToolResponse(
        call_id=call.call_id, tool_name=call.tool_name, content=f"error: {detail}", metadata={"error": True}
    )


def _response(call: ToolCall, value: Any) -> ToolResponse:
    return ToolResponse(call_id=call.call_id, tool_name=call.tool_name, content=_as_text(value))


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=lambda v: v.model_dump(mode="json") if isinstance(v, BaseModel) else str(v))


def _arguments_model(func: Callable[..., Any], descriptions: dict[str, str]) -> type[BaseModel]:
    hints = get_type_hints(func)
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"{func.__name__}: a client tool cannot take *{param.name}")
        if param.name not in hints:
            raise TypeError(f"{func.__name__}: parameter {param.name!r} needs a type hint")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], Field(default, description=descriptions.get(param.name) or None))
    model: type[BaseModel] = create_model(f"{func.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return model


def _flat_parameters(schema: dict[str, Any]) -> list[ToolParameter]:
    """The schema's properties in Llama Stack's flat form (clients that read only ``parameters``)."""
    required = set(schema.get("required", []))
    flat = []
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type")
        flat.append(
            ToolParameter(
                name=name,
                parameter_type=kind if kind in _JSON_TYPES else "object",
                description=prop.get("description", ""),
                required=name in required,
                default=prop.get("default"),
            )
        )
    return flat


def run_blocking(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to its end from sync code, even where this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
