--[[
  Set runtime switches shared by all workers (PUT /v1/config, RocketMQ UPDATE_NAMESRV_CONFIG).

  KEYS:
    1 config       HASH   {P}:config, runtime switches
    2 ver          STRING {P}:ver, registry version counter
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
local K = { config = KEYS[1], ver = KEYS[2] }
local base = key_base(KEYS[1])

local kc = K.config
for i = 1, #ARGV, 2 do rcall("HSET", kc, ARGV[i], ARGV[i + 1]) end
local ch = changes_new()
changes_add_all(ch)
changes_publish(base, K.ver, ch)
return { tonumber(rcall("GET", K.ver)) }
