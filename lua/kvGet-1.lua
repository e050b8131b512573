--[[
  Get a KV config item (RocketMQ GET_KV_CONFIG).

  KEYS:
    1 kv           HASH   {P}:kv:<namespace>, key -> value
  ARGV:
    1 namespace   2 key
  Returns:
    {0}         QUERY_NOT_FOUND
    {1, value}
  Side effects: none.
]]
local rcall = redis.call
local K = { kv = KEYS[1] }

local v = rcall("HGET", K.kv, ARGV[2])
if not v then return { 0 } end
return { 1, v }
