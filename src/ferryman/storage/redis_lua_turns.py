"""The Lua scripts of turns: starting, resuming, steps, finishing, history and leases.

Each runs after the shared library of :mod:`ferryman.storage.redis_scripts`;
ARGV[1] is always the key prefix.
"""

from __future__ import annotations

# History of a turn: the messages of the session's completed turns that started
# before it (session_done holds only completed turns, scored by start), then its
# own. Each turn's messages sit in one list, so they stay together even when an
# older turn was resumed after newer ones ran.
_HISTORY = """
local function history(sid, tid, seq, own)
  local out = {'ok'}
  for _, done in ipairs(redis.call('ZRANGEBYSCORE', key('session_done', sid), '-inf', '(' .. seq)) do
    for _, entry in ipairs(redis.call('LRANGE', key('messages', done), 0, -1)) do out[#out + 1] = entry end
  end
  if own then
    for _, entry in ipairs(redis.call('LRANGE', key('messages', tid), 0, -1)) do out[#out + 1] = entry end
  end
  return out
end

-- A running marker whose turn no longer runs (it should not happen) must not lock the session for good.
local function runs(tid)
  return tid and redis.call('HGET', key('turn', tid), 'status') == 'in_progress'
end
"""

# ARGV: prefix, session, agent ('' = none), turn, status, inputs, overrides,
# started_at, lease score, load history ('1'), history messages...
_START = """
local sid, aid, tid, status = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local s = key('session', sid)
local f = redis.call('HMGET', s, 'seq', 'agent_id', 'running')
if not f[1] or (f[2] or '') ~= aid then return {'not_found'} end
local t = key('turn', tid)
if redis.call('EXISTS', t) == 1 then return {'conflict'} end
if status == 'in_progress' then
  if f[3] and f[3] ~= tid and runs(f[3]) then return {'conflict'} end
  redis.call('HSET', s, 'running', tid)
  redis.call('ZADD', global('leases'), ARGV[9], tid)
end
local seq = next_seq(1)
redis.call('HSET', t, 'session_id', sid, 'status', status, 'inputs', ARGV[6], 'overrides', ARGV[7],
  'started_at', ARGV[8], 'infer_iters', 0, 'seq', seq)
if aid ~= '' then redis.call('HSET', t, 'agent_id', aid) end
redis.call('ZADD', key('session_turns', sid), seq, tid)
append_messages(tid, 11, #ARGV)
if ARGV[10] ~= '1' then return {'ok'} end
return history(sid, tid, seq, true)
"""

# ARGV: prefix, session, turn, lease score. Answers the turn's hash as a flat list.
_CLAIM = """
local sid, tid = ARGV[2], ARGV[3]
local t = key('turn', tid)
local f = redis.call('HMGET', t, 'session_id', 'status')
if f[1] ~= sid then return {'not_found'} end
if f[2] ~= 'awaiting_input' then return {'not_awaiting', f[2]} end
local s = key('session', sid)
local running = redis.call('HGET', s, 'running')
if running and running ~= tid and runs(running) then return {'busy'} end
redis.call('HSET', t, 'status', 'in_progress')
redis.call('HSET', s, 'running', tid)
redis.call('ZADD', global('leases'), ARGV[4], tid)
return {'ok', redis.call('HGETALL', t)}
"""

# ARGV: prefix, turn, infer_iters, step id, pending ('1'), step body, messages...
_SAVE_STEP = """
local tid = ARGV[2]
local t = key('turn', tid)
if redis.call('EXISTS', t) == 0 then return {'not_found'} end
if redis.call('HGET', t, 'status') ~= 'in_progress' then return {'conflict'} end
redis.call('HSET', t, 'infer_iters', ARGV[3])
write_step(tid, ARGV[4], ARGV[5], ARGV[6])
append_messages(tid, 7, #ARGV)
return {'ok'}
"""

# ARGV: prefix, turn, status, infer_iters, output, error code, error message,
# completed_at ('' = none for the last four), has a last step ('1'), step id,
# pending, step body, messages... A turn deleted meanwhile is left deleted, and one
# no longer running (failed when its lease ran out) keeps that end.
_FINISH = """
local tid, status = ARGV[2], ARGV[3]
local t = key('turn', tid)
local f = redis.call('HMGET', t, 'session_id', 'seq', 'status')
if not f[1] or f[3] ~= 'in_progress' then return {'ok'} end
if ARGV[9] == '1' then
  write_step(tid, ARGV[10], ARGV[11], ARGV[12])
  append_messages(tid, 13, #ARGV)
end
redis.call('HSET', t, 'status', status, 'infer_iters', ARGV[4])
local optional = {'output', 'error_code', 'error_message', 'completed_at'}
for i, field in ipairs(optional) do
  local value = ARGV[4 + i]
  if value == '' then redis.call('HDEL', t, field) else redis.call('HSET', t, field, value) end
end
if status == 'completed' then
  redis.call('ZADD', key('session_done', f[1]), f[2], tid)
else
  redis.call('ZREM', key('session_done', f[1]), tid)
end
if status ~= 'in_progress' then
  redis.call('ZREM', global('leases'), tid)
  release(f[1], tid)
end
return {'ok'}
"""

_PENDING = """
local ids = redis.call('ZREVRANGE', key('pending', ARGV[2]), 0, 0)
if #ids == 0 then return {'ok'} end
return {'ok', redis.call('HGET', key('step_bodies', ARGV[2]), ids[1])}
"""

# ARGV: prefix, session, turn.
_LOAD_HISTORY = """
local f = redis.call('HMGET', key('turn', ARGV[3]), 'session_id', 'seq')
if not f[2] then return {'ok'} end
return history(ARGV[2], ARGV[3], f[2], f[1] == ARGV[2])
"""

# ARGV: prefix, session count, sessions..., filter by turn ids ('1'), turn ids...
# Answers {turn id, turn hash, completed step bodies in order} per turn, unsorted.
_LIST_TURNS = """
local n = tonumber(ARGV[2])
local wanted, tids = {}, {}
for i = 3, 2 + n do wanted[ARGV[i]] = true end
if ARGV[3 + n] == '1' then
  for i = 4 + n, #ARGV do tids[#tids + 1] = ARGV[i] end
else
  for i = 3, 2 + n do
    for _, tid in ipairs(redis.call('ZRANGE', key('session_turns', ARGV[i]), 0, -1)) do tids[#tids + 1] = tid end
  end
end
local out = {'ok'}
for _, tid in ipairs(tids) do
  local t = key('turn', tid)
  local sid = redis.call('HGET', t, 'session_id')
  if sid and wanted[sid] then
    local pending, steps = {}, {}
    for _, id in ipairs(redis.call('ZRANGE', key('pending', tid), 0, -1)) do pending[id] = true end
    local bodies = key('step_bodies', tid)
    for _, id in ipairs(redis.call('ZRANGE', key('steps', tid), 0, -1)) do
      if not pending[id] then steps[#steps + 1] = redis.call('HGET', bodies, id) end
    end
    out[#out + 1] = {tid, redis.call('HGETALL', t), steps}
  end
end
return out
"""

# ARGV: prefix, lease score, turn ids...
_RENEW = """
local leases, lost = global('leases'), {'ok'}
for i = 3, #ARGV do
  if redis.call('HGET', key('turn', ARGV[i]), 'status') == 'in_progress' then
    redis.call('ZADD', leases, ARGV[2], ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
"""

# ARGV: prefix, now (epoch seconds), message, completed_at. A turn without a lease
# is scored -inf, so it is always among the expired.
_FAIL_EXPIRED = """
local leases, failed = global('leases'), {'ok'}
for _, tid in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', '(' .. ARGV[2])) do
  redis.call('ZREM', leases, tid)
  local t = key('turn', tid)
  local f = redis.call('HMGET', t, 'status', 'session_id', 'response_id')
  if f[1] == 'in_progress' then
    redis.call('HSET', t, 'status', 'failed', 'error_code', 'interrupted', 'error_message', ARGV[3],
      'completed_at', ARGV[4])
    release(f[2], tid)
    if f[3] and redis.call('EXISTS', key('response', f[3])) == 1 then
      redis.call('HSET', key('response', f[3]), 'interrupted', ARGV[3])
    end
    failed[#failed + 1] = tid .. ' ' .. (f[3] or '')
  end
end
return failed
"""

# ARGV: prefix, turn, first number, frames...
_SAVE_EVENTS = """
if redis.call('EXISTS', key('turn', ARGV[2])) == 0 then return {'not_found'} end
save_events(key('turn_events', ARGV[2]), tonumber(ARGV[3]), 4, #ARGV, true)
return {'ok'}
"""

TURN_SCRIPTS: dict[str, str] = {
    name: _HISTORY + body
    for name, body in {
        "start_turn": _START,
        "claim_resume": _CLAIM,
        "save_step": _SAVE_STEP,
        "finish_turn": _FINISH,
        "pending_step": _PENDING,
        "load_history": _LOAD_HISTORY,
        "list_turns": _LIST_TURNS,
        "renew_leases": _RENEW,
        "fail_expired_turns": _FAIL_EXPIRED,
        "save_turn_events": _SAVE_EVENTS,
    }.items()
}
"""Turn scripts by name, each with the history helpers in front."""
