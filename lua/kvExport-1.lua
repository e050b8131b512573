--[[
  Read the whole KV config at one instant (namesrv admin kv export, GET /v1/kv-config): every namespace ever
  written, an emptied one too (Java's kvConfig.json keeps it as {}), or only those asked for.

  KEYS:
    1 kvns         SET    {P}:kvns, KV namespaces
  ARGV:
    1.. namespaces to read (none: all of them)
  Returns:
    {namespace, {key, value, ...}, namespace, {...}, ...} for the namespaces that exist, in kvns order (the caller
    sorts)
  Side effects: none.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { kvns = KEYS[1] }
local base = key_base(KEYS[1])

local names = ARGV
if #names == 0 then names = rcall("SMEMBERS", K.kvns) end
local out = {}
for _, ns in ipairs(names) do
  if rcall("SISMEMBER", K.kvns, ns) == 1 then
    out[#out + 1] = ns
    out[#out + 1] = rcall("HGETALL", base .. "kv:" .. ns)
  end
end
return out
