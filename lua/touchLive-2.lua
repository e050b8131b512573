--[[
  Write a worker's batch of acknowledged broker heartbeats (RocketMQ 904, BROKER_HEARTBEAT): each worker records
  them in memory and writes them here once per heartbeat_flush_ms (service/core/liveness.py), so a heartbeat costs
  no Redis round trip of its own.

  KEYS:
    1 live         ZSET   {P}:live, "cluster|addr" -> last heartbeat ms
    2 deadlines    ZSET   {P}:deadlines, "cluster|addr" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2 default heartbeat timeout ms (for an entry that lacks its own)
    3k, 3k+1, 3k+2 (k >= 1) clusterName, brokerAddr, age: ms between the heartbeat's acknowledgement and this call
      (measured on the worker's monotonic clock, so workers with skewed clocks agree: the time is now - age)
  Returns:
    {refreshed}  how many entries moved forward
  Side effects:
    live score := max(score, now - age), deadline := that + the broker's timeout, for an entry that is live; an
    entry that is gone (unregistered, expired, dropped by a closed connection) is not brought back, and a later
    registration's or heartbeat's time is never moved back. Publishes nothing (routes unchanged).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { live = KEYS[1], deadlines = KEYS[2] }
local base = key_base(KEYS[1])

local now = now_ms(ARGV[1])
local default_timeout = ARGV[2]
local refreshed = 0
for i = 3, #ARGV - 2, 3 do
  local member = ARGV[i] .. "|" .. ARGV[i + 1]
  local at = now - tonumber(ARGV[i + 2])
  local score = rcall("ZSCORE", K.live, member)
  if score and tonumber(score) < at then
    rcall("ZADD", K.live, at, member)
    rcall("ZADD", K.deadlines, at + tonumber(rcall("HGET", base .. "l:" .. member, "timeout") or default_timeout),
      member)
    refreshed = refreshed + 1
  end
end
return { refreshed }
