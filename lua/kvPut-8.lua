--[[
  Put a KV config item (RocketMQ PUT_KV_CONFIG).

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV:
    1 namespace   2 key   3 value
  Returns:
    {1}
  Side effects:
    namespace registered in kvns; ORDER_TOPIC_CONFIG items change routes (orderTopicConf), so the
    key (a topic) is published on {prefix}:changes.
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

rcall("SADD", K.kvns, ARGV[1])
local before = rcall("HGET", base .. "kv:" .. ARGV[1], ARGV[2])
rcall("HSET", base .. "kv:" .. ARGV[1], ARGV[2], ARGV[3])
if ARGV[1] == "ORDER_TOPIC_CONFIG" and before ~= ARGV[3] then
  local ch = changes_new()
  changes_add(ch, ARGV[2])
  changes_publish(base, K.ver, ch)
end
return { 1 }
