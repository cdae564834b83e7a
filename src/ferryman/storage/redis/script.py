"""One Lua script of the Redis backend as a typed operation: named arguments in, a typed result or an error out.

A :class:`Script` pairs a Lua body with a frozen dataclass of its arguments.
The Lua side sees each field as a local of the same name, read from ``ARGV``
by a prologue generated from the dataclass, so neither side counts positions:

===================================  ===============================================
field type                           in Lua
===================================  ===============================================
``str``, ``StrEnum``, ``Literal``    the string
``str | None``                       the string, ``''`` for ``None``
``int``                              a number
``float``                            the number as Redis reads a score (``-inf`` too)
``bool``                             ``true`` or ``false``
``list[str]``, ``list[bytes]``       a table of strings (bytes passed as they are)
===================================  ===============================================

A script answers ``{OUTCOME, values...}``, ``OUTCOME`` one of the
:class:`Outcome` constants the library defines. :meth:`Scripts.run` decodes
every reply in one place: ``OK`` gives the script's ``result`` of the values,
any other outcome the exception the script maps it to.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Literal, NoReturn, TypeVar, Union, get_args, get_origin, get_type_hints

from redis.asyncio import Redis
from redis.client import NEVER_DECODE
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from ferryman.errors import FerrymanError, InternalError

A = TypeVar("A")
R = TypeVar("R")
A2 = TypeVar("A2")
R2 = TypeVar("R2")

Encoder = Callable[[Any], list[str | bytes]]

_LUA_KEYWORDS = frozenset(
    "and break do else elseif end false for function if in local nil not or repeat return then true until while".split()
)


class Outcome(StrEnum):
    """The first element of every script's reply: ``ok``, or why the script changed nothing."""

    OK = "ok"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    INVALID = "invalid"
    NOT_AWAITING = "not_awaiting"
    ANSWERED = "answered"
    KEY_LOST = "key_lost"
    KEY_HELD = "key_held"


LUA_OUTCOMES = "".join(f"local {outcome.name} = '{outcome.value}'\n" for outcome in Outcome)
"""The outcomes as Lua constants, for the library every script runs after."""

ErrorOf = Callable[[A, list[Any]], FerrymanError]


def nothing(values: list[Any]) -> None:
    """The result of a script that answers ``{OK}`` alone."""


def values(found: list[Any]) -> list[Any]:
    """The result of a script whose values are the result."""
    return found


@dataclass(frozen=True, eq=False)
class Script(Generic[A, R]):
    """A Lua script, its typed arguments and how its reply reads.

    Args:
        args: The frozen dataclass of the script's arguments; each field is a Lua local of the same name.
        body: The Lua, which runs after the backend's library and the arguments' prologue.
        result: Turns the values after ``OK`` into the typed result.
        errors: The exception each other outcome means, built from the arguments and the values after it.
    """

    args: type[A]
    body: str
    result: Callable[[list[Any]], R]
    errors: Mapping[Outcome, ErrorOf[A]] = field(default_factory=dict)
    _encoders: list[tuple[str, Encoder]] = field(init=False, repr=False)
    prologue: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        hints = get_type_hints(self.args)
        encoders: list[tuple[str, Encoder]] = []
        lines = ["local _at = 2"]
        for arg in dataclasses.fields(self.args):  # type: ignore[arg-type]
            if arg.name in _LUA_KEYWORDS or arg.name.startswith("_"):
                raise TypeError(f"{self.args.__name__}.{arg.name} cannot name a Lua local")
            encoder, lua = _field(hints[arg.name])
            encoders.append((arg.name, encoder))
            lines.append(lua.replace("NAME", arg.name))
        object.__setattr__(self, "_encoders", encoders)
        object.__setattr__(self, "prologue", "\n".join(lines) + "\n")

    @property
    def name(self) -> str:
        """The name of the script's arguments' class, for messages."""
        return self.args.__name__

    def argv(self, args: A) -> list[str | bytes]:
        """The ``ARGV`` after the prefix that carries ``args``."""
        if not isinstance(args, self.args):
            raise TypeError(f"{self.name} takes {self.args.__name__}, not {type(args).__name__}")
        out: list[str | bytes] = []
        for name, encode in self._encoders:
            out += encode(getattr(args, name))
        return out

    def decode(self, args: A, reply: list[Any]) -> R:
        """The typed result of a reply, or the exception its outcome means.

        Raises:
            FerrymanError: the script answered an outcome other than ``OK``.
        """
        outcome, found = Outcome(reply[0]), list(reply[1:])
        if outcome is Outcome.OK:
            return self.result(found)
        error = self.errors.get(outcome)
        if error is None:
            raise InternalError(f"the Redis script {self.name} answered '{outcome}', which it never should")
        raise error(args, found)


def _field(kind: Any) -> tuple[Encoder, str]:
    """How one field is encoded into ``ARGV`` and read back in Lua (``NAME`` stands for the local)."""
    scalar = "local NAME = ARGV[_at]; _at = _at + 1"
    if kind is bool:
        return (lambda value: ["1" if value else "0"]), "local NAME = ARGV[_at] == '1'; _at = _at + 1"
    if kind is int:
        return (lambda value: [str(int(value))]), "local NAME = tonumber(ARGV[_at]); _at = _at + 1"
    if kind is float:
        return (lambda value: [repr(float(value))]), scalar
    literal = get_origin(kind) is Literal and all(isinstance(choice, str) for choice in get_args(kind))
    if kind is str or literal or (isinstance(kind, type) and issubclass(kind, StrEnum)):
        return (lambda value: [str(value)]), scalar
    if get_origin(kind) in (Union, types.UnionType) and set(get_args(kind)) == {str, type(None)}:
        return (lambda value: ["" if value is None else value]), scalar
    if get_origin(kind) is list and get_args(kind) in ((str,), (bytes,)):
        lua = "local NAME = {}; for _i = 1, tonumber(ARGV[_at]) do NAME[_i] = ARGV[_at + _i] end; _at = _at + #NAME + 1"
        return (lambda value: [str(len(value)), *value]), lua
    raise TypeError(f"a script argument cannot be of type {kind!r}")


_LOCAL = re.compile(r"^local (?:function )?([\w, ]+?)\s*(?:=|\()", re.MULTILINE)


class Scripts:
    """Runs :class:`Script` objects on one client, each registered once (it loads itself on first use).

    Args:
        client: The client the scripts run on.
        prefix: The key prefix, every script's ``ARGV[1]``.
        library: Lua every script runs after (key naming, shared functions, :data:`LUA_OUTCOMES`).
    """

    def __init__(self, client: Redis, prefix: str, library: str) -> None:
        self._client = client
        self._prefix = prefix
        self._library = library
        self._library_names = {name.strip() for names in _LOCAL.findall(library) for name in names.split(",")}
        self._registered: dict[Script[Any, Any], AsyncScript] = {}

    async def run(self, script: Script[A, R], args: A) -> R:
        """Run ``script`` with ``args``; return its typed result.

        Raises:
            FerrymanError: the error the script's outcome means.
        """
        reply = await self._registered_for(script)(keys=[], args=[self._prefix, *script.argv(args)])
        return script.decode(args, reply)

    async def run_raw(self, script: Script[A, R], args: A) -> R:
        """Like :meth:`run`, but the values of the reply reach ``result`` as bytes, undecoded (``NEVER_DECODE``):
        for a script that answers binary data, embeddings say."""
        registered = self._registered_for(script)
        evalsha = self._client.execute_command
        argv = [self._prefix, *script.argv(args)]
        try:
            reply = await evalsha("EVALSHA", registered.sha, 0, *argv, **{NEVER_DECODE: True})  # type: ignore[no-untyped-call]
        except NoScriptError:
            registered.sha = await self._client.script_load(registered.script)
            reply = await evalsha("EVALSHA", registered.sha, 0, *argv, **{NEVER_DECODE: True})  # type: ignore[no-untyped-call]
        return script.decode(args, [reply[0].decode(), *reply[1:]])

    def call(self, script: Script[A, R], args: A) -> ScriptCall[A, R]:
        """``script`` with ``args``, to send beside another in one trip (:func:`run_together`)."""
        return ScriptCall(self, script, args)

    def _registered_for(self, script: Script[Any, Any]) -> AsyncScript:
        registered = self._registered.get(script)
        if registered is None:
            registered = self._registered[script] = self._register(script)
        return registered

    def _register(self, script: Script[Any, Any]) -> AsyncScript:
        shadowed = {arg.name for arg in dataclasses.fields(script.args)} & self._library_names
        if shadowed:
            raise TypeError(f"{script.name} arguments shadow library names: {sorted(shadowed)}")
        return self._client.register_script(self._library + script.prologue + script.body)


@dataclass(frozen=True)
class ScriptCall(Generic[A, R]):
    """One script with its arguments on one :class:`Scripts`, ready to send."""

    scripts: Scripts
    script: Script[A, R]
    args: A

    def queue(self, pipeline: Any) -> None:
        """Add the call to ``pipeline`` by the script's digest."""
        registered = self.scripts._registered_for(self.script)
        pipeline.evalsha(registered.sha, 0, self.scripts._prefix, *self.script.argv(self.args))

    def answer(self, reply: Any) -> R:
        """The call's result from its pipelined reply (any error it means raised)."""
        if isinstance(reply, Exception):
            raise reply
        return self.script.decode(self.args, reply)


async def run_together(
    client: Redis, first: ScriptCall[A, R], second: ScriptCall[A2, R2]
) -> tuple[R, Callable[[], R2]]:
    """Send two scripts in one trip (a pipeline, not a transaction, so neither may depend on the other's
    writes): the first one's result (or its error, raised), and a function that gives the second one's result
    or raises its error, called once the caller has noted that the first one's writes are stored.

    A script the server does not know yet (its first use, or a restarted server) is run again alone, which
    loads it: that one trip more is paid once per script and server.
    """
    pipeline = client.pipeline(transaction=False)
    first.queue(pipeline)
    second.queue(pipeline)
    replies = await pipeline.execute(raise_on_error=False)
    if isinstance(replies[0], NoScriptError):
        done = await first.scripts.run(first.script, first.args)
    else:
        done = first.answer(replies[0])
    if isinstance(replies[1], NoScriptError):
        try:
            later = await second.scripts.run(second.script, second.args)
        except Exception as exc:  # noqa: BLE001  (raised by the caller, see above)
            return done, functools.partial(_raise, exc)
        return done, lambda: later
    return done, functools.partial(second.answer, replies[1])


def _raise(error: Exception) -> NoReturn:
    raise error
