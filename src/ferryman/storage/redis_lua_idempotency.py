"""The Lua scripts of idempotency keys: claim, renew, complete and release, each atomic.

Each runs after the shared library of :mod:`ferryman.storage.redis_scripts`;
ARGV[1] is always the key prefix and ARGV[2] the record's id (owner and key).
A record is a hash (token, fingerprint, created_at, expires_at in epoch
seconds, result once known) that Redis deletes itself when it expires.
"""

from __future__ import annotations

_EXPIRE = """
local function expire_at(k, seconds) redis.call('PEXPIREAT', k, math.ceil(tonumber(seconds) * 1000)) end
"""

IDEMPOTENCY_SCRIPTS = {
    # ARGV[3] = now, then token, fingerprint, created_at, expires_at of the claim.
    "claim_idempotency_key": _EXPIRE
    + """
local k = key('idempotency', ARGV[2])
local f = redis.call('HMGET', k, 'token', 'fingerprint', 'created_at', 'expires_at', 'result')
if f[1] and tonumber(f[4]) > tonumber(ARGV[3]) then
  if f[5] then return {'held', f[1], f[2], f[3], f[4], '1', f[5]} end
  return {'held', f[1], f[2], f[3], f[4], '0', ''}
end
redis.call('DEL', k)
redis.call('HSET', k, 'token', ARGV[4], 'fingerprint', ARGV[5], 'created_at', ARGV[6], 'expires_at', ARGV[7])
expire_at(k, ARGV[7])
return {'ok'}
""",
    # ARGV[3] = token, ARGV[4] = new expiry, ARGV[5] = '1' to store the result ARGV[6]
    # ('0': renew a pending claim only).
    "update_idempotency_key": _EXPIRE
    + """
local k = key('idempotency', ARGV[2])
if redis.call('HGET', k, 'token') ~= ARGV[3] then return {'not_found'} end
if ARGV[5] == '0' and redis.call('HEXISTS', k, 'result') == 1 then return {'done'} end
redis.call('HSET', k, 'expires_at', ARGV[4])
if ARGV[5] == '1' then redis.call('HSET', k, 'result', ARGV[6]) end
expire_at(k, ARGV[4])
return {'ok'}
""",
    # ARGV[3] = token.
    "release_idempotency_key": """
local k = key('idempotency', ARGV[2])
if redis.call('HGET', k, 'token') == ARGV[3] and redis.call('HEXISTS', k, 'result') == 0 then
  redis.call('DEL', k)
end
return {'ok'}
""",
}
