-- Takes up to `limit` records of `kind` whose lease ended before `now`, oldest first, giving each `status`
-- ('' keeps it) and `lease_until` ('' drops the lease); answers them as they were, as JSON. A record whose new
-- status would take an exclusive slot that another record of its parent holds is left unclaimed.
local excl, found, out = set_of(exclusive), {}, {}
for _, id in ipairs(redis.call('ZRANGE', leasekey(kind), '-inf', '(' .. now, 'BYSCORE')) do
  local m = meta(kind, id)
  if m then found[#found + 1] = m end
end
table.sort(found, function(a, b) return a.seq < b.seq end)
for _, m in ipairs(found) do
  if #out >= limit then break end
  local new = status ~= '' and status or m.status
  local held = redis.call('GET', xkey(kind, m.parent))
  if not (new and excl[new] and held and held ~= m.id) then
    out[#out + 1] = record(kind, m.id)
    set_state(kind, m, new, lease_until ~= '' and lease_until, excl)
  end
end
return {OK, cjson.encode(out)}
