--[[
  The cross-cluster guard for a chunked registration, before it begins and a bounded part of its topics at a
  time (registerBroker checks all of it itself when it gets the topics), in registerBroker's order: the
  brokerName's cluster, the address rule, then the topic rule (a cluster-bound broker may not add itself to a
  topic whose queues live only on other clusters' brokers). Reads only.

  KEYS:
    1 clusters     SET    {P}:clusters, all cluster names
    2 live         ZSET   {P}:live, "cluster|addr" -> last heartbeat ms
  ARGV:
    1 clusterName   2 brokerName   3 brokerAddr   4 topics to check: "name\n" repeated
  Returns:
    {1}               none refused
    {-1, ownerCluster} BROKER_NAME_CONFLICT: the brokerName belongs to another cluster
    {-5, brokerAddr}  CROSS_CLUSTER_REFUSED: a live broker of another cluster holds the address
    {-4, topic}       CROSS_CLUSTER_REFUSED: the topic lives only on other clusters' brokers
  Side effects:
    none.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { clusters = KEYS[1], live = KEYS[2] }
local base = key_base(KEYS[1])

local cluster, name, addr = ARGV[1], ARGV[2], ARGV[3]
local owner = rcall("HGET", base .. "b:" .. name, "cluster")
if owner and owner ~= cluster then return { -1, owner } end
if addr_held_elsewhere(K.clusters, K.live, cluster, addr) then return { -5, addr } end
local refused = topic_refused(base, cluster, name, ARGV[4])
if refused then return { -4, refused } end
return { 1 }
