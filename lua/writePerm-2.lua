--[[
  Wipe or add the write permission of a broker's queue data (RocketMQ 205 / 327).

  KEYS:
    1 brokerTopics SET    {P}:bt:<brokerName>, that broker's topics
    2 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 brokerName   2 mode: "wipe" (perm &= ~WRITE) | "add" (perm = READ|WRITE = 6, as Java: overwrites
    INHERIT and PRIORITY)
  Returns:
    {topicCount}  topics that have queue data of this broker (counted even when perm was unchanged)
  Side effects:
    queue data perms; a new topic generation for the broker ({P}:tg) when a perm changed. Publishes changed
    topics. Cost O(the broker's topics) through the reverse index.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { brokerTopics = KEYS[1], ver = KEYS[2] }
local base = key_base(KEYS[1])

local name, mode = ARGV[1], ARGV[2]
local ch = changes_new()
local count = 0
for _, t in ipairs(rcall("SMEMBERS", K.brokerTopics)) do
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
if ch.n > 0 or ch.all then topics_touched(base, name) end
changes_publish(base, K.ver, ch)
return { count }
