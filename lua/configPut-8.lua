--[[
  Set runtime switches shared by all workers (PUT /v1/config, RocketMQ UPDATE_NAMESRV_CONFIG).

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV:
    1.. name, value pairs (already validated by the caller)
  Returns:
    {registryVersion}
  Side effects:
    HSET {prefix}:config; routes may render differently (acting master, orderTopicConf), so every
    worker's route cache is flushed: publishes "*" on {prefix}:changes.
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

local kc = base .. "config"
for i = 1, #ARGV, 2 do rcall("HSET", kc, ARGV[i], ARGV[i + 1]) end
local ch = changes_new()
changes_add_all(ch)
changes_publish(base, K.ver, ch)
return { tonumber(rcall("GET", K.ver)) }
