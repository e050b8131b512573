--[[
  Get a KV config item (RocketMQ GET_KV_CONFIG).

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV:
    1 namespace   2 key
  Returns:
    {0}         QUERY_NOT_FOUND
    {1, value}
  Side effects: none.
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

local v = rcall("HGET", base .. "kv:" .. ARGV[1], ARGV[2])
if not v then return { 0 } end
return { 1, v }
