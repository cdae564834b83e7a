"""The Lua scripts of responses and conversations, each a typed script.

Kept in Lua because each checks before it writes several keys, atomically: a
new response starts with its record, its input items, its turn (and the session
it opens); a finished response stores its body, events and conversation items
all or nothing; a conversation is created only once, with its first items;
deletes cascade through keys found as they go. Items are the kernel's records:
a script that stores some runs the kernel's batch that puts them. The chain
read walks ``previous_response_id`` hop by hop, one snapshot in one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.redis.embedded import KERNEL_HAS, KERNEL_WRITE, KernelWrite, with_kernel_errors
from ferryman.storage.redis.kernel import ERRORS as KERNEL_ERRORS
from ferryman.storage.redis.lua_idempotency import KEY_ERRORS, SETTLE, SettlesKey
from ferryman.storage.redis.lua_turns import TURN_REFUSED, TURN_START, TurnStart
from ferryman.storage.redis.script import Outcome, Script, nothing, values


@dataclass(frozen=True)
class ResponseColumns:
    """A response's columns and body (``None``: absent), as :data:`START_RESPONSE` and :data:`FINISH_RESPONSE`
    store them."""

    response_id: str
    turn_id: str
    session_id: str
    conversation_id: str | None
    previous_response_id: str | None
    background: bool
    body: str


@dataclass(frozen=True)
class StartResponse(TurnStart, KernelWrite):
    """A new response with its turn (as :class:`TurnStart`), the write of its record and input items and, with
    ``opens_session``, the session they open: its anchor (the turn's agent its agent), its record's write in the
    same batch."""

    response_id: str
    conversation_id: str | None
    previous_response_id: str | None
    background: bool
    body: str
    opens_session: bool


@dataclass(frozen=True)
class FinishResponse(ResponseColumns, KernelWrite):
    """A finished response, and the write of its events (first) and its conversation's new items."""


@dataclass(frozen=True)
class ResponseId:
    """One response."""

    response_id: str


@dataclass(frozen=True)
class DeleteResponse(KernelWrite):
    """One response, and the deletes of its record and of its own session's record, the session's id left for
    the script to fill in (or the delete to drop): only the script knows whether the response had a session of
    its own, and which."""

    response_id: str


@dataclass(frozen=True)
class CreateConversation(SettlesKey, KernelWrite):
    """The write of a conversation's record and first items, and the key outcome stored with them; with
    ``opens_session``, the session it opens (its anchor; its record's write in the same batch)."""

    session_id: str
    opens_session: bool = False


# As in SQL, an update changes the body only; it also drops a failure laid over
# it by fail_expired_turns. A new response needs its turn, which it is deleted with.
_UPSERT = """
local function upsert_response()
  local r = key('response', response_id)
  if redis.call('EXISTS', r) == 1 then
    redis.call('HSET', r, 'body', body)
    redis.call('HDEL', r, 'interrupted')
    return true
  end
  local t = key('turn', turn_id)
  if redis.call('EXISTS', t) == 0 then return false end
  redis.call('HSET', r, 'turn_id', turn_id, 'session_id', session_id, 'conversation_id', conversation_id,
    'previous_response_id', previous_response_id, 'background', background and '1' or '0', 'body', body)
  redis.call('HSET', t, 'response_id', response_id)
  return true
end
"""

# Every refusal of its own comes before the kernel's batch (the response's record, and the session's when it opens
# one), which checks its own before any write; then the anchor, the turn, the response and its items. A
# conversation deleted since the service read it is missing first, as on SQL, whatever else would refuse.
START_RESPONSE = Script(
    StartResponse,
    _UPSERT
    + TURN_START
    + SETTLE
    + KERNEL_HAS
    + """
local refused = key_refusal()
if refused then return refused end
if conversation_id ~= '' and not kernel_has('conversation', conversation_id) then return {NOT_FOUND, 'conversation'} end
if opens_session and redis.call('EXISTS', key('session', session_id)) == 1 then return {CONFLICT, 'session'} end
refused = turn_refusal(opens_session)
if refused then return refused end
"""
    + KERNEL_WRITE
    + """
if opens_session then new_session(session_id, agent_id) end
write_turn()
upsert_response()
settle_key()
return {OK}
""",
    nothing,
    with_kernel_errors(
        {
            **TURN_REFUSED,
            Outcome.NOT_FOUND: lambda a, found: (
                NotFoundError(f"conversation '{a.conversation_id}' not found")
                if found == ["conversation"]
                else TURN_REFUSED[Outcome.NOT_FOUND](a, found)
            ),
            Outcome.CONFLICT: lambda a, found: (
                ConflictError(f"session '{a.session_id}' already exists")
                if found == ["session"]
                else TURN_REFUSED[Outcome.CONFLICT](a, found)
            ),
            **KEY_ERRORS,
        },
        KERNEL_ERRORS,
    ),
)

# The kernel's batch writes the events into the record's log and puts the conversation's new items (refusing an id
# it holds) before anything else is written.
FINISH_RESPONSE = Script(
    FinishResponse,
    _UPSERT
    + KERNEL_HAS
    + """
if redis.call('EXISTS', key('response', response_id)) == 0 and redis.call('EXISTS', key('turn', turn_id)) == 0 then
  return {NOT_FOUND}
end
-- A conversation deleted while the response ran takes no items: they would belong to nothing.
if conversation_id == '' or not kernel_has('conversation', conversation_id) then
  kernel_ops = cjson.encode({cjson.decode(kernel_ops)[1]})
end
"""
    + KERNEL_WRITE
    + """
upsert_response()
return {OK}
""",
    nothing,
    with_kernel_errors({Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"turn '{a.turn_id}' not found")}, KERNEL_ERRORS),
)

# The response's record goes with it. Without a conversation, the response's session was its own: it goes too, its
# record with it (the second delete of the batch, whose id only the script reads; in a conversation, dropped).
DELETE_RESPONSE = Script(
    DeleteResponse,
    """
local f = redis.call('HMGET', key('response', response_id), 'turn_id', 'session_id', 'conversation_id')
if not f[1] then return {NOT_FOUND} end
local own_session = f[3] == ''
local deletes = cjson.decode(kernel_ops)
if own_session then deletes[2].id = f[2] else deletes[2] = nil end
kernel_ops = cjson.encode(deletes)
"""
    + KERNEL_WRITE
    + """
del_response(response_id)
if own_session then del_session(f[2]) else del_turn(f[1]) end
return {OK}
""",
    nothing,
    with_kernel_errors(
        {Outcome.NOT_FOUND: lambda a, _: NotFoundError(f"response '{a.response_id}' not found")}, KERNEL_ERRORS
    ),
)

# The messages of each response's turn along previous_response_id, oldest first.
# The walk is bounded, so a cycle cannot keep the server busy.
CHAIN_HISTORY = Script(
    ResponseId,
    """
local turns, rid = {}, response_id
while rid and rid ~= '' and #turns < 100000 do
  local f = redis.call('HMGET', key('response', rid), 'turn_id', 'previous_response_id')
  if not f[1] then break end
  turns[#turns + 1] = f[1]
  rid = f[2]
end
local out = {OK}
for i = #turns, 1, -1 do
  for _, entry in ipairs(redis.call('LRANGE', key('messages', turns[i]), 0, -1)) do out[#out + 1] = entry end
end
return out
""",
    values,
)

# The conversation's record and first items (the kernel's, which checks its session or puts the one it opens),
# with the session's anchor when it opens one, in one script.
CREATE_CONVERSATION = Script(
    CreateConversation,
    SETTLE
    + """
local refused = key_refusal()
if refused then return refused end
"""
    + KERNEL_WRITE
    + """
if opens_session then new_session(session_id, '') end
settle_key()
return {OK}
""",
    nothing,
    with_kernel_errors(KEY_ERRORS, KERNEL_ERRORS),
)
