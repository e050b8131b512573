--[[
  Delete a KV config item (RocketMQ DELETE_KV_CONFIG). The namespace stays listed, even when emptied,
  so a later list returns an empty table (as Java keeps the empty map).

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV:
    1 namespace   2 key
  Returns:
    {deleted 0/1}
  Side effects:
    ORDER_TOPIC_CONFIG deletions are published on {prefix}:changes.
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

local n = rcall("HDEL", base .. "kv:" .. ARGV[1], ARGV[2])
if n == 1 and ARGV[1] == "ORDER_TOPIC_CONFIG" then
  local ch = changes_new()
  changes_add(ch, ARGV[2])
  changes_publish(base, K.ver, ch)
end
return { n }
