-- Moves the lease of each listed record of `kind` that holds one to `lease_until`; answers the ids renewed.
local out = {OK}
for _, id in ipairs(ids) do
  local r = rkey(kind, id)
  if redis.call('HEXISTS', r, 'lease') == 1 then
    redis.call('HSET', r, 'lease', lease_until)
    redis.call('ZADD', leasekey(kind), tonumber(lease_until), id)
    out[#out + 1] = id
  end
end
return out
