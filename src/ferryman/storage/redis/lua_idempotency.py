"""The Lua scripts of idempotency keys: claim, update and release, each a typed script.

Each checks the record's token (or expiry) before it writes, atomically. A
record is a hash (token, fingerprint, created_at, expires_at in epoch seconds,
result once known) that Redis deletes itself when it expires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ferryman.errors import IdempotencyKeyInUseError
from ferryman.storage.base import IdempotencyKeyHeldError
from ferryman.storage.redis.embedded import KERNEL_WRITE, KernelWrite, with_kernel_errors
from ferryman.storage.redis.kernel import ERRORS as KERNEL_ERRORS
from ferryman.storage.redis.script import Outcome, Script, nothing, values

_EXPIRE = """
local function expire_at(k, seconds) redis.call('PEXPIREAT', k, math.ceil(tonumber(seconds) * 1000)) end
"""


@dataclass(frozen=True)
class Claim:
    """A claim of the record ``record_id`` at ``now`` (epoch seconds), unless a live record holds it."""

    record_id: str
    now: float
    token: str
    fingerprint: str
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class Update:
    """A new expiry for the claim with ``token``; with ``complete``, its call's ``result`` too."""

    record_id: str
    token: str
    expires_at: float
    complete: bool
    result: str


@dataclass(frozen=True)
class Release:
    """Forget the claim with ``token`` while it is pending (with ``whatever``: even once it has its result)."""

    record_id: str
    token: str
    whatever: bool = False


@dataclass(frozen=True)
class Holder:
    """The record that holds a key: token, fingerprint, creation and expiry (epoch seconds), result."""

    token: str
    fingerprint: str
    created_at: float
    expires_at: float
    result: str | None


def _holder(found: list[Any]) -> Holder | None:
    if not found:
        return None
    token, fingerprint, created, expires, done, result = found
    return Holder(token, fingerprint, float(created), float(expires), result if done == "1" else None)


# Answers nothing when claimed, else the holder.
CLAIM = Script(
    Claim,
    _EXPIRE
    + """
local k = key('idempotency', record_id)
local f = redis.call('HMGET', k, 'token', 'fingerprint', 'created_at', 'expires_at', 'result')
if f[1] and tonumber(f[4]) > tonumber(now) then
  if f[5] then return {OK, f[1], f[2], f[3], f[4], '1', f[5]} end
  return {OK, f[1], f[2], f[3], f[4], '0', ''}
end
redis.call('DEL', k)
redis.call('HSET', k, 'token', token, 'fingerprint', fingerprint, 'created_at', created_at, 'expires_at', expires_at)
expire_at(k, expires_at)
return {OK}
""",
    _holder,
)

# Answers 1 when updated; 0 when the claim no longer holds the key or, renewing, has its result.
UPDATE = Script(
    Update,
    _EXPIRE
    + """
local k = key('idempotency', record_id)
if redis.call('HGET', k, 'token') ~= token then return {OK, 0} end
if not complete and redis.call('HEXISTS', k, 'result') == 1 then return {OK, 0} end
redis.call('HSET', k, 'expires_at', expires_at)
if complete then redis.call('HSET', k, 'result', result) end
expire_at(k, expires_at)
return {OK, 1}
""",
    lambda found: bool(found[0]),
)

RELEASE = Script(
    Release,
    """
local k = key('idempotency', record_id)
if redis.call('HGET', k, 'token') == token and (whatever or redis.call('HEXISTS', k, 'result') == 0) then
  redis.call('DEL', k)
end
return {OK}
""",
    nothing,
)


@dataclass(frozen=True, kw_only=True)
class SettlesKey:
    """The arguments of a script that stores an idempotency key's outcome with the record it writes (see
    ``KeySettlement``): the key's record ("": none), the claim's token, and the outcome until its expiry; with
    ``key_claiming``, the script claims the key itself (its fingerprint, at ``key_created``)."""

    key_record: str = ""
    key_token: str = ""
    key_result: str = ""
    key_expires: float = 0.0
    key_claiming: bool = False
    key_fingerprint: str = ""
    key_created: float = 0.0


# For a script over SettlesKey: key_refusal() first, before any read that may refuse or any write (a reply to
# return, or nil); settle_key() after its writes.
SETTLE = """
local function key_refusal()
  if key_record == '' then return nil end
  local k = key('idempotency', key_record)
  if key_claiming then
    local f = redis.call('HMGET', k, 'fingerprint', 'expires_at', 'result', 'token')
    if f[1] and tonumber(f[2]) > tonumber(key_created) then
      if f[3] then return {KEY_HELD, f[1], '1', f[3], f[4]} end
      return {KEY_HELD, f[1], '0', '', f[4]}
    end
    return nil
  end
  if redis.call('HGET', k, 'token') == key_token and redis.call('HEXISTS', k, 'result') == 0 then return nil end
  return {KEY_LOST}
end
local function settle_key()
  if key_record == '' then return end
  local k = key('idempotency', key_record)
  if key_claiming then
    redis.call('DEL', k)
    redis.call('HSET', k, 'token', key_token, 'fingerprint', key_fingerprint, 'created_at', key_created)
  end
  redis.call('HSET', k, 'result', key_result, 'expires_at', key_expires)
  redis.call('PEXPIREAT', k, math.ceil(tonumber(key_expires) * 1000))
end
"""


def key_lost(args: Any, found: list[Any]) -> IdempotencyKeyInUseError:
    """The error of a script's ``KEY_LOST``: the claim lapsed and another call holds the key."""
    return IdempotencyKeyInUseError("another request with this Idempotency-Key took it over; retry later")


def key_taken(args: Any, found: list[Any]) -> IdempotencyKeyHeldError:
    """The error of a script's ``KEY_HELD``: the key it claims is held by an earlier call."""
    fingerprint, done, result, token = found
    return IdempotencyKeyHeldError(fingerprint, result if done == "1" else None, token)


KEY_ERRORS = {Outcome.KEY_LOST: key_lost, Outcome.KEY_HELD: key_taken}
"""The errors of a script over :class:`SettlesKey`."""


@dataclass(frozen=True)
class KeyedWrite(SettlesKey, KernelWrite):
    """Arguments of :data:`KEYED_WRITE`: a kernel batch, and the key outcome stored with what it makes."""


# The key's refusal first, then the kernel's batch (which checks all of its own before it writes), then the key.
KEYED_WRITE = Script(
    KeyedWrite,
    SETTLE
    + """
local refused = key_refusal()
if refused then return refused end
"""
    + KERNEL_WRITE
    + """
settle_key()
return {OK, kernel_written[2]}
""",
    values,
    with_kernel_errors(dict(KEY_ERRORS), KERNEL_ERRORS),
)
