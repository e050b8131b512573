--[[
  Broker heartbeats / QUERY_DATA_VERSION (RocketMQ 322 and 904): refresh liveness of each (cluster, addr)
  that has a live entry. Several heartbeats arriving together are sent as one call (service/coalesce.py).

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV:
    1 now ms ("" = Redis TIME)
    2k, 2k+1 (k >= 1) clusterName, brokerAddr of each heartbeat
  Returns:
    {found, dataVersion, found, dataVersion, ...} one pair per heartbeat, in order:
      found 0 = no live entry for (cluster, addr): the broker must register (dataVersion "");
      found 1 = refreshed; dataVersion = the stored "timestamp,counter,stateVersion"
  Side effects:
    live score := now, deadline := now + the broker's timeout. Publishes nothing (routes unchanged).
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

local now = now_ms(ARGV[1])
local out = {}
for i = 2, #ARGV - 1, 2 do
  local member = ARGV[i] .. "|" .. ARGV[i + 1]
  if rcall("ZSCORE", K.live, member) then
    local info = rcall("HMGET", base .. "l:" .. member, "timeout", "dv")
    rcall("ZADD", K.live, now, member)
    rcall("ZADD", K.deadlines, now + tonumber(info[1] or "120000"), member)
    out[#out + 1] = 1
    out[#out + 1] = info[2] or ""
  else
    out[#out + 1] = 0
    out[#out + 1] = ""
  end
end
return out
