--[[
  Cluster info (RocketMQ GET_BROKER_CLUSTER_INFO): brokerAddrTable and clusterAddrTable.

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV: none
  Returns:
    {{{brokerName, cluster, enableActingMaster, zoneName|"", {id, addr, ...}}, ...},
     {{cluster, {brokerName, ...}}, ...}}
  Side effects: none. Cost O(brokers); clusters are few by nature.
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

local brokers = {}
for _, bname in ipairs(rcall("SMEMBERS", K.brokers)) do
  local meta = rcall("HMGET", base .. "b:" .. bname, "cluster", "enableActingMaster", "zoneName")
  brokers[#brokers + 1] = { bname, meta[1] or "", meta[2] or "0", meta[3] or "",
                            rcall("HGETALL", base .. "ba:" .. bname) }
end
local clusters = {}
for _, c in ipairs(rcall("SMEMBERS", K.clusters)) do
  clusters[#clusters + 1] = { c, rcall("SMEMBERS", base .. "c:" .. c) }
end
return { brokers, clusters }
