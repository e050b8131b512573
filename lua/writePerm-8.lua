--[[
  Wipe or add the write permission of a broker's queue data (RocketMQ 205 / 327).

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV:
    1 brokerName   2 mode: "wipe" (perm &= ~WRITE) | "add" (perm = READ|WRITE = 6, as Java: overwrites
    INHERIT and PRIORITY)
  Returns:
    {topicCount}  topics that have queue data of this broker (counted even when perm was unchanged)
  Side effects:
    queue data perms. Publishes changed topics. Cost O(the broker's topics) through the reverse index.
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

local name, mode = ARGV[1], ARGV[2]
local ch = changes_new()
local count = 0
for _, t in ipairs(rcall("SMEMBERS", base .. "bt:" .. name)) do
  local kt = base .. "t:" .. t
  local enc = rcall("HGET", kt, name)
  if enc then
    count = count + 1
    local p = qd_perm(enc)
    local np
    if mode == "wipe" then np = clear_write(p) else np = 6 end
    if np ~= p then
      rcall("HSET", kt, name, qd_with_perm(enc, np))
      changes_add(ch, t)
    end
  end
end
changes_publish(base, K.ver, ch)
return { count }
