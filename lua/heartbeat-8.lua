--[[
  Broker heartbeat / QUERY_DATA_VERSION (RocketMQ 322 and 904): refresh liveness if the entry exists.

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV:
    1 clusterName   2 brokerAddr   3 now ms ("" = Redis TIME)
  Returns:
    {0, ""}           no live entry for (cluster, addr): the broker must register
    {1, dataVersion}  refreshed; the stored "timestamp,counter,stateVersion"
  Side effects:
    live score := now, deadline := now + the broker's timeout. Publishes nothing (routes unchanged).
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

local member = ARGV[1] .. "|" .. ARGV[2]
if not rcall("ZSCORE", K.live, member) then return { 0, "" } end
local now = now_ms(ARGV[3])
local kl = base .. "l:" .. member
local info = rcall("HMGET", kl, "timeout", "dv")
rcall("ZADD", K.live, now, member)
rcall("ZADD", K.deadlines, now + tonumber(info[1] or "120000"), member)
return { 1, info[2] or "" }
