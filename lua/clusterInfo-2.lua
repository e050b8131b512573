--[[
  Cluster info (RocketMQ GET_BROKER_CLUSTER_INFO): brokerAddrTable and clusterAddrTable.

  KEYS:
    1 brokers      SET    {P}:brokers, all brokerNames
    2 clusters     SET    {P}:clusters, all cluster names
  ARGV: none
  Returns:
    {{{brokerName, cluster, enableActingMaster, zoneName|"", {id, addr, ...}}, ...},
     {{cluster, {brokerName, ...}}, ...}, civer|""}
    civer: {P}:civer as these tables reflect it (read in the same script), which every change to them renews:
    a worker keeps its copy while a GET of it answers the same (service/core/cluster_infos.py)
  Side effects: none, but for a registry with brokers and no civer (written before it existed): civer is set.
    Cost O(brokers); clusters are few by nature.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { brokers = KEYS[1], clusters = KEYS[2] }
local base = key_base(KEYS[1])

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
-- A registry written before the counter existed (by an earlier release) has brokers and no civer: start it here,
-- or no worker could keep a copy until a broker changed.
if #brokers > 0 and rcall("EXISTS", base .. "civer") == 0 then cluster_info_changed(base) end
return { brokers, clusters, rcall("GET", base .. "civer") or "" }
