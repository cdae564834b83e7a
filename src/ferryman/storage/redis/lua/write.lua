-- A write batch, atomically. Pass 1 checks every operation's precondition against the state the operations
-- before it leave (an overlay of their changes over Redis) and fails before anything is written, since Redis
-- has no rollback; pass 2 applies the operations in order and answers their results (reads see earlier writes).
S = cjson.decode(schema)
local batch = cjson.decode(ops)
local EX = {}
for name, kind in pairs(S) do EX[name] = set_of(kind.exclusive) end

-- Pass 1: the overlay. recs['<kind>:<id>'] = meta or false (deleted); slots['<kind>:<parent>'] = holder id or
-- false; kids['<kind>:<parent>'] = ids the batch created there.
local over = {recs = {}, slots = {}, kids = {}}

local function view(k, id)
  local v = over.recs[k .. ':' .. id]
  if v == nil then return meta(k, id) end
  return v or nil
end

local function holder(k, parent)
  local v = over.slots[k .. ':' .. parent]
  if v == nil then return redis.call('GET', xkey(k, parent)) end
  return v
end

-- Refuses a record an exclusive status that another record of its parent holds; notes who holds the slot.
local function take_slot(k, m)
  local held, at = holder(k, m.parent), k .. ':' .. m.parent
  if m.status and EX[k][m.status] then
    if held and held ~= m.id then
      local other = view(k, held)
      fail(CONFLICT, S[k].noun .. " '" .. held .. "' is " .. tostring(other and other.status) .. " in '" .. m.parent .. "'")
    end
    over.slots[at] = m.id
  elseif held == m.id then
    over.slots[at] = false
  end
end

local function gone(k, m)
  for _, ck in ipairs(S[k].children) do
    local ids = redis.call('ZRANGE', ckey(ck, m.id), 0, -1)
    for _, id in ipairs(over.kids[ck .. ':' .. m.id] or {}) do ids[#ids + 1] = id end
    for _, id in ipairs(ids) do
      local c = view(ck, id)
      if c and c.parent == m.id then gone(ck, c) end
    end
  end
  if holder(k, m.parent) == m.id then over.slots[k .. ':' .. m.parent] = false end
  over.recs[k .. ':' .. m.id] = false
end

local CHECK = {}
function CHECK.check(op)
  local m = view(op.k, op.id)
  if not m or (op.parent and m.parent ~= op.parent) or not allowed(compile(op.read), m) then
    fail(NOT_FOUND, missing(op.k, op.id))
  end
  if not allowed(compile(op.act), m) then fail(INVALID, 'not allowed on ' .. S[op.k].noun .. " '" .. op.id .. "'") end
end

function CHECK.put(op)
  local k, kind = op.k, S[op.k]
  if op.parent ~= '' then
    local found = false
    for _, pk in ipairs(kind.parents) do found = found or view(pk, op.parent) ~= nil end
    if not found then fail(NOT_FOUND, ((S[kind.parents[1]] or {}).noun or 'parent') .. " '" .. op.parent .. "' not found") end
  end
  local old = view(k, op.id)
  if old and op.mode == 'create' then fail(CONFLICT, kind.noun .. " '" .. op.id .. "' already exists") end
  local m = {id = op.id, seq = 0, parent = op.parent, terms = op.terms, at = op.at, k = op.idx}
  if old then m.seq, m.parent, m.terms, m.at = old.seq, old.parent, old.terms, old.at end
  m.status, m.lease = op.status or false, op.lease or false
  take_slot(k, m)
  if not old then
    local at = k .. ':' .. m.parent
    over.kids[at] = over.kids[at] or {}
    table.insert(over.kids[at], op.id)
  end
  over.recs[k .. ':' .. op.id] = m
end

local function expected(op, m) return not op.expect or (m.status and set_of(op.expect)[m.status]) end

function CHECK.patch(op)
  local m = view(op.k, op.id)
  if not m then
    if op.required then fail(NOT_FOUND, missing(op.k, op.id)) end
    return
  end
  if not expected(op, m) then
    if op.required then
      fail(CONFLICT, S[op.k].noun .. " '" .. op.id .. "' is " .. tostring(m.status) .. ', not ' .. table.concat(op.expect, ', '))
    end
    return
  end
  local new = {id = m.id, seq = m.seq, parent = m.parent, terms = m.terms, at = m.at, status = m.status, lease = m.lease,
    k = {m.k[1], m.k[2], m.k[3]}}
  if op.status ~= nil then new.status = op.status end
  if op.lease ~= nil then new.lease = op.lease end
  for _, pair in ipairs(op.idx) do new.k[pair[1]] = pair[2] end
  take_slot(op.k, new)
  over.recs[op.k .. ':' .. op.id] = new
end

function CHECK.delete(op)
  local m = view(op.k, op.id)
  if m then gone(op.k, m) end
end

function CHECK.append(op)
  if not view(op.k, op.id) then fail(NOT_FOUND, missing(op.k, op.id)) end
end
CHECK.rewrite = CHECK.append

function CHECK.page(op)
  if op.after and not view(op.k, op.after) then fail(NOT_FOUND, missing(op.k, op.after)) end
end

-- Pass 2: the writes.
local function put_body(r, fields)
  for _, pair in ipairs(fields) do redis.call('HSET', r, 'b:' .. pair[1], pair[2]) end
end

local function index(k, id, seq, slot, old, new)
  if old then redis.call('ZREM', ikey(k, slot, old), id) end
  if new then
    redis.call('ZADD', ikey(k, slot, new), seq, id)
    redis.call('HSET', rkey(k, id), 'k' .. slot, new)
  else
    redis.call('HDEL', rkey(k, id), 'k' .. slot)
  end
end

local function push(key, entries)
  for i = 1, #entries, 500 do redis.call('RPUSH', key, unpack(entries, i, math.min(i + 499, #entries))) end
end

local APPLY = {}
function APPLY.check() return null end

function APPLY.put(op)
  local k, r = op.k, rkey(op.k, op.id)
  local m = meta(k, op.id)
  if m then
    for _, name in ipairs(redis.call('HKEYS', r)) do
      if name:sub(1, 2) == 'b:' then redis.call('HDEL', r, name) end
    end
  else
    m = {id = op.id, seq = redis.call('INCR', SEQ), parent = op.parent, k = {false, false, false}}
    redis.call('HSET', r, 'seq', m.seq, 'parent', op.parent, 'at', op.at, 'terms', op.terms)
    if op.owner then redis.call('HSET', r, 'owner', op.owner) end
    redis.call('ZADD', akey(k), m.seq, op.id)
    redis.call('ZADD', ckey(k, op.parent), m.seq, op.id)
    for _, t in ipairs(cjson.decode(op.terms)) do
      redis.call('ZADD', tkey(k, t), m.seq, op.id)
      redis.call('ZADD', tpkey(k, op.parent, t), m.seq, op.id)
    end
  end
  put_body(r, op.body)
  for slot = 1, 3 do
    if m.k[slot] ~= op.idx[slot] then index(k, op.id, m.seq, slot, m.k[slot], op.idx[slot]) end
  end
  set_state(k, m, op.status or false, op.lease or false, EX[k])
  return m.seq
end

function APPLY.patch(op)
  local m = meta(op.k, op.id)
  if not m or not expected(op, m) then return false end
  local r = rkey(op.k, op.id)
  put_body(r, op.merge)
  for _, name in ipairs(op.drop) do redis.call('HDEL', r, 'b:' .. name) end
  for _, pair in ipairs(op.idx) do
    local slot, value = pair[1], pair[2]
    if m.k[slot] ~= value then index(op.k, op.id, m.seq, slot, m.k[slot], value) end
  end
  local status, lease = m.status, m.lease
  if op.status ~= nil then status = op.status end
  if op.lease ~= nil then lease = op.lease end
  set_state(op.k, m, status, lease, EX[op.k])
  return true
end

local function drop(k, m)
  for _, ck in ipairs(S[k].children) do
    local key = ckey(ck, m.id)
    for _, id in ipairs(redis.call('ZRANGE', key, 0, -1)) do
      local c = meta(ck, id)
      if c then drop(ck, c) end
    end
    redis.call('DEL', key)
  end
  for _, ch in ipairs(S[k].logs) do redis.call('DEL', lkey(k, ch, m.id)) end
  redis.call('ZREM', akey(k), m.id)
  redis.call('ZREM', ckey(k, m.parent), m.id)
  for _, t in ipairs(cjson.decode(m.terms)) do
    redis.call('ZREM', tkey(k, t), m.id)
    redis.call('ZREM', tpkey(k, m.parent, t), m.id)
  end
  for slot = 1, 3 do
    if m.k[slot] then redis.call('ZREM', ikey(k, slot, m.k[slot]), m.id) end
  end
  redis.call('ZREM', leasekey(k), m.id)
  if redis.call('GET', xkey(k, m.parent)) == m.id then redis.call('DEL', xkey(k, m.parent)) end
  redis.call('DEL', rkey(k, m.id))
end

function APPLY.delete(op)
  local m = meta(op.k, op.id)
  if not m then return false end
  drop(op.k, m)
  return true
end

function APPLY.append(op)
  local key = lkey(op.k, op.ch, op.id)
  local n = redis.call('LLEN', key)
  push(key, op.entries)
  return n
end

function APPLY.rewrite(op)
  local key = lkey(op.k, op.ch, op.id)
  redis.call('DEL', key)
  push(key, op.entries)
  return #op.entries
end

return guarded(function()
  for _, op in ipairs(batch) do
    if CHECK[op.o] then CHECK[op.o](op) end
  end
  local out = {}
  for i, op in ipairs(batch) do out[i] = (APPLY[op.o] or READS[op.o])(op) end
  return out
end)
