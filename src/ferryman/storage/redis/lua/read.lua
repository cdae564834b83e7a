-- Read operations on one snapshot (a script runs alone); the answer is their results as one JSON array.
S = cjson.decode(schema)
return guarded(function()
  local out = {}
  for i, op in ipairs(cjson.decode(ops)) do out[i] = READS[op.o](op) end
  return out
end)
