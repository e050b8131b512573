--[[
  Broker heartbeats / QUERY_DATA_VERSION (RocketMQ 322 and 904): refresh liveness of each (cluster, addr)
  that has a live entry. Several heartbeats arriving together are sent as one call (service/coalesce.py).

  KEYS:
    1 live         ZSET   {P}:live, "cluster|addr" -> last heartbeat ms
    2 deadlines    ZSET   {P}:deadlines, "cluster|addr" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2 default heartbeat timeout ms (for an entry that lacks its own)
    2k+1, 2k+2 (k >= 1) clusterName, brokerAddr of each heartbeat
  Returns:
    {found, dataVersion, found, dataVersion, ...} one pair per heartbeat, in order:
      found 0 = no live entry for (cluster, addr): the broker must register (dataVersion "");
      found 1 = refreshed; dataVersion = the stored "timestamp,counter,stateVersion"
  Side effects:
    live score := now, deadline := now + the broker's timeout. Publishes nothing (routes unchanged).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { live = KEYS[1], deadlines = KEYS[2] }
local base = key_base(KEYS[1])

local now = now_ms(ARGV[1])
local default_timeout = ARGV[2]
local out = {}
for i = 3, #ARGV - 1, 2 do
  local member = ARGV[i] .. "|" .. ARGV[i + 1]
  if rcall("ZSCORE", K.live, member) then
    local info = rcall("HMGET", base .. "l:" .. member, "timeout", "dv")
    rcall("ZADD", K.live, now, member)
    rcall("ZADD", K.deadlines, now + tonumber(info[1] or default_timeout), member)
    out[#out + 1] = 1
    out[#out + 1] = info[2] or ""
  else
    out[#out + 1] = 0
    out[#out + 1] = ""
  end
end
return out
