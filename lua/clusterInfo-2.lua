--[[
  Cluster info (RocketMQ GET_BROKER_CLUSTER_INFO): brokerAddrTable and clusterAddrTable, whole in one call. Workers
  read it in bounded steps (clusterInfoStep-1) and call this only when changes kept disturbing the steps.

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
  brokers[#brokers + 1] = cluster_info_row(base, bname)
end
local clusters = {}
for _, c in ipairs(rcall("SMEMBERS", K.clusters)) do
  clusters[#clusters + 1] = { c, rcall("SMEMBERS", base .. "c:" .. c) }
end
return { brokers, clusters, cluster_info_version(base, K.brokers) }
