"""The Lua scripts of responses, conversations and their items.

Each runs after the shared library of :mod:`ferryman.storage.redis_scripts`;
ARGV[1] is always the key prefix.
"""

from __future__ import annotations

# ARGV[2..8]: response, turn, session, conversation ('' = none), previous
# response ('' = none), background ('1'), body. As in SQL, an update changes the
# body only; it also drops a failure laid over it by fail_expired_turns. A new
# response needs its turn, which it is deleted with.
_UPSERT = """
local function upsert_response()
  local rid = ARGV[2]
  local r = key('response', rid)
  if redis.call('EXISTS', r) == 1 then
    redis.call('HSET', r, 'body', ARGV[8])
    redis.call('HDEL', r, 'interrupted')
    return true
  end
  local t = key('turn', ARGV[3])
  if redis.call('EXISTS', t) == 0 then return false end
  local seq = next_seq(1)
  redis.call('HSET', r, 'turn_id', ARGV[3], 'session_id', ARGV[4], 'conversation_id', ARGV[5],
    'previous_response_id', ARGV[6], 'background', ARGV[7], 'body', ARGV[8], 'seq', seq)
  redis.call('ZADD', global('responses'), seq, rid)
  redis.call('HSET', t, 'response_id', rid)
  return true
end
"""

_SAVE = """
if not upsert_response() then return {'not_found'} end
return {'ok'}
"""

# ARGV[2..8] as in upsert_response, then the event count n, the n events
# (numbered from 0), then (item id, item JSON) pairs for the conversation.
_FINISH = """
local n = tonumber(ARGV[9])
local first_item, conversation = 10 + n, ARGV[5]
if conversation ~= '' and not items_ok(conversation, first_item, #ARGV) then return {'invalid'} end
if not upsert_response() then return {'not_found'} end
save_events(key('response_events', ARGV[2]), 0, 10, 9 + n, false)
if conversation ~= '' then insert_items(conversation, first_item, #ARGV) end
return {'ok'}
"""

# Without a conversation, the response's session was its own: it goes too.
_DELETE = """
local f = redis.call('HMGET', key('response', ARGV[2]), 'turn_id', 'session_id', 'conversation_id')
if not f[1] then return {'not_found'} end
del_response(ARGV[2])
if f[3] == '' then del_session(f[2]) else del_turn(f[1]) end
return {'ok'}
"""

# The messages of each response's turn along previous_response_id, oldest first.
# The walk is bounded, so a cycle cannot keep the server busy.
_CHAIN = """
local turns, rid = {}, ARGV[2]
while rid and rid ~= '' and #turns < 100000 do
  local f = redis.call('HMGET', key('response', rid), 'turn_id', 'previous_response_id')
  if not f[1] then break end
  turns[#turns + 1] = f[1]
  rid = f[2]
end
local out = {'ok'}
for i = #turns, 1, -1 do
  for _, entry in ipairs(redis.call('LRANGE', key('messages', turns[i]), 0, -1)) do out[#out + 1] = entry end
end
return out
"""

# ARGV: prefix, conversation, session, metadata, created_at, item pairs...
_CREATE_CONVERSATION = """
local cid, sid = ARGV[2], ARGV[3]
if redis.call('EXISTS', key('session', sid)) == 0 then return {'not_found'} end
local c = key('conversation', cid)
if redis.call('EXISTS', c) == 1 then return {'conflict'} end
if not items_ok(cid, 6, #ARGV) then return {'invalid'} end
redis.call('HSET', c, 'session_id', sid, 'metadata', ARGV[4], 'created_at', ARGV[5])
redis.call('SADD', key('session_convs', sid), cid)
insert_items(cid, 6, #ARGV)
return {'ok'}
"""

_UPDATE_CONVERSATION = """
local c = key('conversation', ARGV[2])
if redis.call('EXISTS', c) == 0 then return {'not_found'} end
redis.call('HSET', c, 'metadata', ARGV[3])
return {'ok', redis.call('HMGET', c, 'session_id', 'metadata', 'created_at')}
"""

_DELETE_CONVERSATION = """
if redis.call('EXISTS', key('conversation', ARGV[2])) == 0 then return {'not_found'} end
del_conversation(ARGV[2])
return {'ok'}
"""

# ARGV: prefix, owner, item pairs...
_ADD_ITEMS = """
if not items_ok(ARGV[2], 3, #ARGV) then return {'invalid'} end
insert_items(ARGV[2], 3, #ARGV)
return {'ok'}
"""

RESPONSE_SCRIPTS: dict[str, str] = {
    "save_response": _UPSERT + _SAVE,
    "finish_response": _UPSERT + _FINISH,
    "delete_response": _DELETE,
    "chain_history": _CHAIN,
    "create_conversation": _CREATE_CONVERSATION,
    "update_conversation": _UPDATE_CONVERSATION,
    "delete_conversation": _DELETE_CONVERSATION,
    "add_items": _ADD_ITEMS,
}
"""Response, conversation and item scripts by name."""
