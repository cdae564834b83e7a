-- The library every kernel script runs after: key names, records, filters and the read operations.
-- Keys start with the prefix (ARGV[1]). Kind and channel names hold no ':' (keys.py checks that), and a name
-- that is not a key's last part is length-prefixed, so no id can make two keys collide.
local P = ARGV[1]
local null = cjson.null
local SEQ = P .. 'seq'
local S = {} -- the schema (kinds by name: noun, parents, children, exclusive, logs), set by each script

local function lp(s) return #s .. ':' .. s end
local function rkey(k, id) return P .. 'r:' .. k .. ':' .. id end
local function akey(k) return P .. 'a:' .. k end
local function ckey(k, parent) return P .. 'c:' .. k .. ':' .. parent end
local function tkey(k, term) return P .. 't:' .. k .. ':' .. term end
local function tpkey(k, parent, term) return P .. 'tp:' .. k .. ':' .. lp(parent) .. ':' .. term end
local function ikey(k, slot, value) return P .. 'i:' .. k .. ':' .. slot .. ':' .. value end
local function lkey(k, ch, id) return P .. 'l:' .. k .. ':' .. ch .. ':' .. id end
local function xkey(k, parent) return P .. 'x:' .. k .. ':' .. parent end
local function leasekey(k) return P .. 'lease:' .. k end

-- Ends the script with an outcome other than OK (see guarded): a write batch raises it before it writes.
local function fail(...) error({fail = {...}}) end

local function guarded(fn)
  local ok, res = pcall(fn)
  if ok then return {OK, cjson.encode(res)} end
  if type(res) == 'table' and res.fail then return res.fail end
  error(res)
end

local function missing(k, id) return S[k].noun .. " '" .. id .. "' not found" end

local function set_of(list)
  local s = {}
  for _, v in ipairs(list or {}) do s[v] = true end
  return s
end

-- What checks and listings read of a record (nil: none). Absent fields are false.
local function meta(k, id)
  local v = redis.call('HMGET', rkey(k, id), 'seq', 'parent', 'status', 'terms', 'at', 'lease', 'k1', 'k2', 'k3')
  if not v[1] then return nil end
  return {id = id, seq = tonumber(v[1]), parent = v[2], status = v[3], terms = v[4], at = v[5], lease = v[6],
    k = {v[7], v[8], v[9]}}
end

-- A record as the Python side reads it: kind, id and every field of its hash.
local function record(k, id)
  local flat = redis.call('HGETALL', rkey(k, id))
  if #flat == 0 then return null end
  return {k, id, flat}
end

-- Sets the status and lease of a record, keeping its parent's exclusive slot and the lease index with them.
local function set_state(k, m, status, lease, excl)
  local r, x = rkey(k, m.id), xkey(k, m.parent)
  if status then redis.call('HSET', r, 'status', status) else redis.call('HDEL', r, 'status') end
  if status and excl[status] then
    redis.call('SET', x, m.id)
  elseif redis.call('GET', x) == m.id then
    redis.call('DEL', x)
  end
  if lease then
    redis.call('HSET', r, 'lease', lease)
    redis.call('ZADD', leasekey(k), tonumber(lease), m.id)
  else
    redis.call('HDEL', r, 'lease')
    redis.call('ZREM', leasekey(k), m.id)
  end
end

-- Filters (filters.to_json): term and id lists become sets, kept beside the lists (f[3]) for the indexes.
local function compile(f)
  local tag = f[1]
  if tag == 'terms' or tag == 'ids' then return {tag, set_of(f[2]), f[2]} end
  if tag == 'not' then return {tag, compile(f[2])} end
  if tag == 'and' or tag == 'or' then
    local parts = {}
    for i, part in ipairs(f[2]) do parts[i] = compile(part) end
    return {tag, parts}
  end
  return {tag}
end

local function admits(f, terms, id)
  local tag = f[1]
  if tag == 'all' then return true end
  if tag == 'nothing' then return false end
  if tag == 'ids' then return f[2][id] == true end
  if tag == 'not' then return not admits(f[2], terms, id) end
  if tag == 'terms' then
    for _, t in ipairs(terms) do if f[2][t] then return true end end
    return false
  end
  local want = tag == 'or'
  for _, part in ipairs(f[2]) do
    if admits(part, terms, id) == want then return want end
  end
  return not want
end

local function allowed(f, m) return f[1] == 'all' or admits(f, cjson.decode(m.terms), m.id) end

-- The sets a filter's records all lie in (nil: it needs a scan), and how many ids they hold.
local function sources(f, k, parent)
  local tag = f[1]
  if tag == 'nothing' then return {}, 0 end
  if tag == 'ids' then return {{ids = f[3]}}, #f[3] end
  if tag == 'terms' then
    local out, n = {}, 0
    for i, t in ipairs(f[3]) do
      out[i] = {key = parent and tpkey(k, parent, t) or tkey(k, t)}
      n = n + redis.call('ZCARD', out[i].key)
    end
    return out, n
  end
  if tag ~= 'and' and tag ~= 'or' then return nil end
  local out, n = nil, nil
  for _, part in ipairs(f[2]) do
    local s, m = sources(part, k, parent)
    if tag == 'or' then
      if not s then return nil end
      out, n = out or {}, (n or 0) + m
      for _, x in ipairs(s) do out[#out + 1] = x end
    elseif s and (not n or m < n) then
      out, n = s, m
    end
  end
  return out, n
end

-- A stream of {id, seq} in seq order after a bound: from a sorted set in growing chunks, or from a sorted list.
local function zstream(key, bound, desc, size) return {key = key, bound = bound, desc = desc, size = size, buf = {}, at = 1} end

local function idstream(k, ids, cursor, desc)
  local buf = {}
  for _, id in ipairs(ids) do
    local seq = redis.call('HGET', rkey(k, id), 'seq')
    seq = seq and tonumber(seq)
    if seq and (not cursor or (desc and seq < cursor) or (not desc and seq > cursor)) then buf[#buf + 1] = {id, seq} end
  end
  table.sort(buf, function(a, b) if desc then return a[2] > b[2] end return a[2] < b[2] end)
  return {buf = buf, at = 1}
end

local function peek(s)
  if s.at <= #s.buf then return s.buf[s.at] end
  if not s.key then return nil end
  local r
  if s.desc then
    r = redis.call('ZRANGE', s.key, '(' .. s.bound, '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, s.size, 'WITHSCORES')
  else
    r = redis.call('ZRANGE', s.key, '(' .. s.bound, '+inf', 'BYSCORE', 'LIMIT', 0, s.size, 'WITHSCORES')
  end
  if #r < 2 * s.size then s.key = nil end
  s.buf, s.at, s.size = {}, 1, math.min(s.size * 2, 1000)
  for i = 1, #r, 2 do s.buf[#s.buf + 1] = {r[i], tonumber(r[i + 1])} end
  if #s.buf == 0 then return nil end
  s.bound = s.buf[#s.buf][2]
  return s.buf[1]
end

-- The next {id, seq} across streams, skipping the one just given (a record in several term sets).
local function next_of(streams, desc, last)
  while true do
    local best, from = nil, nil
    for _, s in ipairs(streams) do
      local head = peek(s)
      if head and (not best or (desc and head[2] > best[2]) or (not desc and head[2] < best[2])) then
        best, from = head, s
      end
    end
    if not best then return nil end
    from.at = from.at + 1
    if best[2] ~= last then return best end
  end
end

local function page(op)
  local k, f, desc, limit, offset = op.k, compile(op.allow), op.desc, op.limit, op.offset
  local cursor
  if op.after then
    cursor = redis.call('HGET', rkey(k, op.after), 'seq')
    if not cursor then fail(NOT_FOUND, missing(k, op.after)) end
    cursor = tonumber(cursor)
  end
  -- Read the smallest of: the kind's (or parent's) set, the declared index's, or the filter's term sets.
  local plan = {{key = op.parent and ckey(k, op.parent) or akey(k)}}
  local n = redis.call('ZCARD', plan[1].key)
  if op.where then
    local key = ikey(k, op.where[1], op.where[2])
    local m = redis.call('ZCARD', key)
    if m < n then plan, n = {{key = key}}, m end
  end
  local s, m = sources(f, k, op.parent)
  if s and m < n then plan = s end
  local size = math.max(16, math.min((limit or 1000) + offset + 1, 1000))
  local streams = {}
  for i, src in ipairs(plan) do
    streams[i] = src.key and zstream(src.key, cursor or (desc and '+inf' or '-inf'), desc, size)
      or idstream(k, src.ids, cursor, desc)
  end
  local statuses, since, till = op.statuses and set_of(op.statuses), tonumber(op.since), tonumber(op.till)
  local found, skipped, last = {}, 0, nil
  while not limit or #found <= limit do
    local head = next_of(streams, desc, last)
    if not head then break end
    last = head[2]
    local r = meta(k, head[1])
    if r and (not op.parent or r.parent == op.parent) and (not op.where or r.k[op.where[1]] == op.where[2])
      and (not statuses or (r.status and statuses[r.status])) and (not since or tonumber(r.at) >= since)
      and (not till or tonumber(r.at) < till) and allowed(f, r) then
      if skipped < offset then skipped = skipped + 1 else found[#found + 1] = head[1] end
    end
  end
  local items = {}
  for i = 1, math.min(#found, limit or #found) do items[i] = record(k, found[i]) end
  return {items, limit ~= nil and #found > limit}
end

local function count(op)
  local out = {}
  for _, id in ipairs(redis.call('ZRANGE', ckey(op.k, op.parent), 0, -1)) do
    local r = meta(op.k, id)
    if r and r.status and (not op.where or r.k[op.where[1]] == op.where[2]) then out[r.status] = (out[r.status] or 0) + 1 end
  end
  return out
end

local function events(op)
  local first = math.max(op.after + 1, 0)
  if op.limit and op.limit <= 0 then return {} end
  local out = {}
  for i, e in ipairs(redis.call('LRANGE', lkey(op.k, op.ch, op.id), first, op.limit and first + op.limit - 1 or -1)) do
    out[#out + 1] = first + i - 1
    out[#out + 1] = e
  end
  return out
end

local function history(op)
  local key, ids = ckey(op.k, op.parent), nil
  if op.through then
    local seq = redis.call('ZSCORE', key, op.through)
    if not seq then return {} end
    ids = redis.call('ZRANGE', key, '-inf', seq, 'BYSCORE')
  else
    ids = redis.call('ZRANGE', key, 0, -1)
  end
  local statuses, out = set_of(op.statuses), {}
  for _, id in ipairs(ids) do
    local status = redis.call('HGET', rkey(op.k, id), 'status')
    if (status and statuses[status]) or id == op.through then
      for i, e in ipairs(redis.call('LRANGE', lkey(op.k, op.ch, id), 0, -1)) do
        out[#out + 1] = id
        out[#out + 1] = i - 1
        out[#out + 1] = e
      end
    end
  end
  return out
end

local function chain(op)
  local out, id = {}, op.id
  while id and #out < op.limit do
    local rec = record(op.k, id)
    if rec == null then break end
    out[#out + 1] = rec
    id = redis.call('HGET', rkey(op.k, id), 'k' .. op.slot)
  end
  return out
end

local READS = {page = page, count = count, events = events, history = history, chain = chain}
function READS.get(op)
  local r = meta(op.k, op.id)
  if not r or (op.parent and r.parent ~= op.parent) or not allowed(compile(op.allow), r) then return null end
  return record(op.k, op.id)
end
function READS.getmany(op)
  local out = {}
  for _, id in ipairs(op.ids) do
    local rec = record(op.k, id)
    if rec ~= null then out[#out + 1] = rec end
  end
  return out
end
function READS.logcount(op) return redis.call('LLEN', lkey(op.k, op.ch, op.id)) end
