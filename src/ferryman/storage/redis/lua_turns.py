"""The Lua scripts of turns, each a typed :class:`~ferryman.storage.redis.script.Script`.

Kept in Lua because each reads state and writes on what it read, atomically:
one running turn per session across replicas (start, resume), a step or end
stored only while the turn still runs (save step, finish), a lease failure
taken by one caller only (fail expired), and events stored only for a turn
that exists (a late replica must not recreate a deleted turn's events). The
history read is here because starting a turn reads it in the same transaction,
and is written once for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ferryman.api.agents import TurnStatus
from ferryman.errors import ConflictError, FailureCode, NotFoundError
from ferryman.storage.base import ExpiredTurn
from ferryman.storage.redis.embedded import KERNEL_WRITE, KernelWrite, with_kernel_errors
from ferryman.storage.redis.kernel import ERRORS as KERNEL_ERRORS
from ferryman.storage.redis.lua_idempotency import KEY_ERRORS, SETTLE, SettlesKey
from ferryman.storage.redis.script import ErrorOf, Outcome, Script, nothing, values

# History of a turn (storage/history_cache.py): the session's history epoch; the
# session's turns completed after start order ``after`` (all of them when the caller
# kept them under another epoch), each its score and its messages (session_done holds
# only completed turns, scored by start); then the turn's own messages. Each turn's
# messages sit in one list, so they stay together even when an older turn was resumed
# after newer ones ran. The reply: OK, epoch (-1: no such session), the ``after`` used,
# the turn's own order ('': none, after every completed turn), then per turn its order,
# its count and its entries, ending with an order of 0 and the own entries.
_HISTORY = """
local function history(sid, tid, own_seq, known_epoch, after)
  local s = key('session', sid)
  if redis.call('EXISTS', s) == 0 then return {OK, -1, 0, '', 0} end
  local epoch = tonumber(redis.call('HGET', s, 'history_epoch') or '0')
  if epoch ~= known_epoch then after = 0 end
  local out = {OK, epoch, after, own_seq}
  local done = redis.call('ZRANGEBYSCORE', key('session_done', sid), '(' .. after, '+inf', 'WITHSCORES')
  for i = 1, #done, 2 do
    local entries = redis.call('LRANGE', key('messages', done[i]), 0, -1)
    out[#out + 1] = done[i + 1]
    out[#out + 1] = #entries
    for _, entry in ipairs(entries) do out[#out + 1] = entry end
  end
  out[#out + 1] = 0
  if own_seq ~= '' then
    for _, entry in ipairs(redis.call('LRANGE', key('messages', tid), 0, -1)) do out[#out + 1] = entry end
  end
  return out
end

-- A running marker whose turn no longer runs (it should not happen) must not lock the session for good.
local function runs(tid)
  return tid and redis.call('HGET', key('turn', tid), 'status') == IN_PROGRESS
end

-- Whether a turn of the session waits queued (an entry whose turn no longer waits is dropped).
local function queued(sid)
  local waiting = key('session_queued', sid)
  for _, tid in ipairs(redis.call('ZRANGE', waiting, 0, -1)) do
    if redis.call('HGET', key('turn', tid), 'status') == QUEUED then return true end
    redis.call('ZREM', waiting, tid)
  end
  return false
end
"""


@dataclass(frozen=True)
class TurnStart(SettlesKey):
    """A new turn, its input messages and its owner: what :data:`TURN_START` stores."""

    session_id: str
    agent_id: str | None
    turn_id: str
    status: TurnStatus
    inputs: str
    overrides: str
    started_at: str
    lease: float
    messages: list[str]
    owner: str | None
    """The turn's owner as stored (None: none), kept in the turn's hash, so that it goes with the turn."""


@dataclass(frozen=True)
class StartTurn(TurnStart):
    """A new turn, its input messages, and whether to answer its history."""

    with_history: bool
    epoch: int
    """The history epoch of what the caller keeps of the session's history (-1: nothing)."""
    after: int
    """The start order of the newest turn the caller keeps."""


@dataclass(frozen=True)
class ClaimResume(SettlesKey):
    """An awaiting (or queued) turn to run, under a lease."""

    session_id: str
    turn_id: str
    lease: float
    expected: str = "awaiting_input"
    overrides: str = ""
    """The turn's overrides from now on, as JSON ("": kept)."""
    with_history: bool = False
    epoch: int = -1
    """What the caller keeps of the session's history (see :class:`StartTurn`)."""
    after: int = 0
    pending: str = ""
    """The step the turn must still wait on ("": any)."""


@dataclass(frozen=True)
class SaveStep:
    """A step of a running turn, the history messages it adds and the turn's inference count."""

    turn_id: str
    infer_iters: int
    step_id: str
    pending: bool
    step: str
    messages: list[str]


@dataclass(frozen=True)
class RedactTurnInput:
    """A running turn's input messages and history messages, in the form that replaces what it started with."""

    turn_id: str
    inputs: str
    messages: list[str]


@dataclass(frozen=True)
class FinishTurn:
    """A turn's final or awaiting columns (``None``: absent), and its last step if ``step_id`` is set."""

    turn_id: str
    status: TurnStatus
    infer_iters: int
    output: str | None
    error_code: str | None
    error_message: str | None
    completed_at: str | None
    step_id: str | None
    pending: bool
    step: str | None
    messages: list[str]
    overrides: str = ""
    """The turn's overrides from now on, as JSON ("": kept)."""


@dataclass(frozen=True)
class DeleteTurn(KernelWrite):
    """A turn, the session it is looked up in, and the delete of its response's record, its id left for the script
    to fill in: only the script reads whether the turn ran for a response."""

    session_id: str
    turn_id: str


@dataclass(frozen=True)
class HistoryOf:
    """A turn's history, and what the caller keeps of its session's (see :class:`StartTurn`)."""

    session_id: str
    turn_id: str
    epoch: int
    after: int


@dataclass(frozen=True)
class FailExpired:
    """Fail running turns whose lease ended before ``now`` with ``code`` and ``message``."""

    now: float
    code: FailureCode
    message: str
    completed_at: str


@dataclass(frozen=True)
class SaveTurnEvents:
    """Event data of a turn, numbered from ``first_seq``."""

    turn_id: str
    first_seq: int
    events: list[str]


def _resumed(found: list[Any]) -> tuple[dict[str, str], list[Any]]:
    """A resumed turn's hash, and the history the script read (empty when not asked)."""
    flat, history = found
    return dict(zip(flat[::2], flat[1::2], strict=True)), history


def _expired(found: list[Any]) -> list[ExpiredTurn]:
    return [ExpiredTurn(turn_id, response_id or None, session_id or None) for turn_id, response_id, session_id in found]


# The new turn of a script whose arguments are TurnStart's, in two parts, so that a script can write something
# else between its refusals and its writes: turn_refusal answers the refusal to return (nil: none) and writes
# nothing but the drop of stale queue entries; write_turn stores the turn and answers its start order. A session
# the same script opens (opened) is new: only the turn's id can refuse the turn. start_turn runs both.
TURN_START = (
    _HISTORY
    + """
local function turn_refusal(opened)
  local f = {}
  if not opened then
    f = redis.call('HMGET', key('session', session_id), 'seq', 'agent_id', 'running')
    if not f[1] or (f[2] or '') ~= agent_id then return {NOT_FOUND} end
  end
  if redis.call('EXISTS', key('turn', turn_id)) == 1 then return {CONFLICT} end
  if status == IN_PROGRESS then
    if f[3] and f[3] ~= turn_id and runs(f[3]) then return {CONFLICT} end
    if queued(session_id) then return {CONFLICT, QUEUED} end
  end
  return nil
end

local function write_turn()
  if status == IN_PROGRESS then redis.call('HSET', key('session', session_id), 'running', turn_id) end
  if status == IN_PROGRESS or status == QUEUED then redis.call('ZADD', global('leases'), lease, turn_id) end
  local seq = next_seq(1)
  if status == QUEUED then redis.call('ZADD', key('session_queued', session_id), seq, turn_id) end
  local t = key('turn', turn_id)
  redis.call('HSET', t, 'session_id', session_id, 'status', status, 'inputs', inputs, 'overrides', overrides,
    'started_at', started_at, 'infer_iters', 0, 'seq', seq)
  if agent_id ~= '' then redis.call('HSET', t, 'agent_id', agent_id) end
  if owner ~= '' then redis.call('HSET', t, 'owner', owner) end
  redis.call('ZADD', key('session_turns', session_id), seq, turn_id)
  append_messages(turn_id, messages)
  return seq
end

local function start_turn()
  local refused = turn_refusal(false)
  if refused then return refused end
  return nil, write_turn()
end
"""
)

TURN_REFUSED: dict[Outcome, ErrorOf[Any]] = {
    Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"session '{a.session_id}' of agent '{a.agent_id}' not found"),
    Outcome.CONFLICT: lambda a, found: ConflictError(
        f"session '{a.session_id}' has turns queued; send the turn with a multitask_strategy "
        "to queue it behind them, or wait for them to finish"
        if found
        else f"session '{a.session_id}' already has a turn in progress; wait for it to finish"
    ),
}
"""The errors of :data:`TURN_START`'s refusals."""

START_TURN = Script(
    StartTurn,
    TURN_START
    + SETTLE
    + """
local refused = key_refusal()
if refused then return refused end
local stopped, seq = start_turn()
if stopped then return stopped end
settle_key()
if not with_history then return {OK} end
return history(session_id, turn_id, seq, epoch, after)
""",
    values,
    {**TURN_REFUSED, **KEY_ERRORS},
)

# Answers the turn's hash.
CLAIM_RESUME = Script(
    ClaimResume,
    _HISTORY
    + SETTLE
    + """
local refused = key_refusal()
if refused then return refused end
local t = key('turn', turn_id)
local f = redis.call('HMGET', t, 'session_id', 'status')
if f[1] ~= session_id then return {NOT_FOUND} end
if f[2] ~= expected then return {NOT_AWAITING, f[2]} end
if pending ~= '' and not redis.call('ZSCORE', key('pending', turn_id), pending) then return {ANSWERED} end
local s = key('session', session_id)
local running = redis.call('HGET', s, 'running')
if running and running ~= turn_id and runs(running) then return {CONFLICT} end
redis.call('HSET', t, 'status', IN_PROGRESS)
if overrides ~= '' then redis.call('HSET', t, 'overrides', overrides) end
redis.call('ZREM', key('session_queued', session_id), turn_id)
redis.call('HSET', s, 'running', turn_id)
redis.call('ZADD', global('leases'), lease, turn_id)
settle_key()
local fields = redis.call('HGETALL', t)
if not with_history then return {OK, fields, {}} end
return {OK, fields, history(session_id, turn_id, redis.call('HGET', t, 'seq'), epoch, after)}
""",
    _resumed,
    {
        Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"turn '{a.turn_id}' of session '{a.session_id}' not found"),
        **KEY_ERRORS,
        Outcome.NOT_AWAITING: lambda a, found: ConflictError(
            f"turn '{a.turn_id}' is not {a.expected} (status: {found[0]}); nothing to run"
        ),
        Outcome.CONFLICT: lambda a, _: ConflictError(f"session '{a.session_id}' already has a turn in progress"),
        Outcome.ANSWERED: lambda a, _: ConflictError(
            f"turn '{a.turn_id}' no longer waits on step '{a.pending}': it was answered meanwhile"
        ),
    },
)

SAVE_STEP = Script(
    SaveStep,
    """
local t = key('turn', turn_id)
if redis.call('EXISTS', t) == 0 then return {NOT_FOUND} end
if redis.call('HGET', t, 'status') ~= IN_PROGRESS then return {CONFLICT} end
redis.call('HSET', t, 'infer_iters', infer_iters)
write_step(turn_id, step_id, pending, step)
append_messages(turn_id, messages)
return {OK}
""",
    nothing,
    {
        Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"turn '{a.turn_id}' no longer exists"),
        Outcome.CONFLICT: lambda a, _: ConflictError(
            f"turn '{a.turn_id}' no longer runs (it was failed or finished elsewhere)"
        ),
    },
)

REDACT_TURN_INPUT = Script(
    RedactTurnInput,
    """
local t = key('turn', turn_id)
if redis.call('EXISTS', t) == 0 then return {NOT_FOUND} end
if redis.call('HGET', t, 'status') ~= IN_PROGRESS then return {CONFLICT} end
redis.call('HSET', t, 'inputs', inputs)
redis.call('DEL', key('messages', turn_id))
append_messages(turn_id, messages)
return {OK}
""",
    nothing,
    {
        Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"turn '{a.turn_id}' no longer exists"),
        Outcome.CONFLICT: lambda a, _: ConflictError(
            f"turn '{a.turn_id}' no longer runs (it was failed or finished elsewhere)"
        ),
    },
)

# A turn deleted meanwhile is left deleted, and one no longer running (failed
# when its lease ran out) keeps that end.
FINISH_TURN = Script(
    FinishTurn,
    """
local t = key('turn', turn_id)
local f = redis.call('HMGET', t, 'session_id', 'seq', 'status')
if not f[1] or (f[3] ~= IN_PROGRESS and f[3] ~= QUEUED) then return {OK} end
if step_id ~= '' then
  write_step(turn_id, step_id, pending, step)
  append_messages(turn_id, messages)
end
redis.call('HSET', t, 'status', status, 'infer_iters', infer_iters)
if overrides ~= '' then redis.call('HSET', t, 'overrides', overrides) end
local optional = {output = output, error_code = error_code, error_message = error_message,
  completed_at = completed_at}
for field, value in pairs(optional) do
  if value == '' then redis.call('HDEL', t, field) else redis.call('HSET', t, field, value) end
end
if status == COMPLETED then
  local done = key('session_done', f[1])
  redis.call('ZADD', done, f[2], turn_id)
  if #redis.call('ZRANGEBYSCORE', done, '(' .. f[2], '+inf', 'LIMIT', 0, 1) > 0 then history_changed(f[1]) end
else
  redis.call('ZREM', key('session_done', f[1]), turn_id)
end
if status ~= IN_PROGRESS then
  redis.call('ZREM', global('leases'), turn_id)
  release(f[1], turn_id)
end
return {OK}
""",
    nothing,
)

LOAD_HISTORY = Script(
    HistoryOf,
    _HISTORY
    + """
local f = redis.call('HMGET', key('turn', turn_id), 'session_id', 'seq')
return history(session_id, turn_id, (f[2] and f[1] == session_id) and f[2] or '', epoch, after)
""",
    values,
)

# A turn without a lease is scored -inf, so it is always among the expired.
FAIL_EXPIRED = Script(
    FailExpired,
    """
local leases, failed = global('leases'), {OK}
for _, tid in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', '(' .. now)) do
  redis.call('ZREM', leases, tid)
  local t = key('turn', tid)
  local f = redis.call('HMGET', t, 'status', 'session_id', 'response_id')
  if f[1] == IN_PROGRESS or f[1] == QUEUED then
    redis.call('HSET', t, 'status', FAILED, 'error_code', code, 'error_message', message,
      'completed_at', completed_at)
    release(f[2], tid)
    if f[3] and redis.call('EXISTS', key('response', f[3])) == 1 then
      redis.call('HSET', key('response', f[3]), 'interrupted', message)
    end
    failed[#failed + 1] = {tid, f[3] or '', f[2] or ''}
  end
end
return failed
""",
    _expired,
)

SAVE_TURN_EVENTS = Script(
    SaveTurnEvents,
    """
if redis.call('EXISTS', key('turn', turn_id)) == 0 then return {NOT_FOUND} end
save_events(key('turn_events', turn_id), first_seq, events, true)
return {OK}
""",
    nothing,
    {Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"turn '{a.turn_id}' not found")},
)

# Only a turn that does not run goes: a run still writing would find its turn gone midway. The response it ran
# for goes with it (del_turn), and that response's record in the same script.
DELETE_TURN = Script(
    DeleteTurn,
    """
local f = redis.call('HMGET', key('turn', turn_id), 'session_id', 'status', 'response_id')
if f[1] ~= session_id then return {NOT_FOUND} end
if f[2] == IN_PROGRESS then return {CONFLICT} end
if f[3] and f[3] ~= '' then
  local deletes = cjson.decode(kernel_ops)
  deletes[1].id = f[3]
  kernel_ops = cjson.encode(deletes)
"""
    + KERNEL_WRITE
    + """
end
del_turn(turn_id)
return {OK}
""",
    nothing,
    with_kernel_errors(
        {
            Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"turn '{a.turn_id}' of session '{a.session_id}' not found"),
            Outcome.CONFLICT: lambda a, _: ConflictError(f"turn '{a.turn_id}' is running; it cannot be deleted"),
        },
        KERNEL_ERRORS,
    ),
)
