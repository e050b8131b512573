--[[
  One bounded step of a cluster info read (RocketMQ GET_BROKER_CLUSTER_INFO): a chunk of brokerAddrTable by SSCAN
  over the brokers set. clusterInfo-2 reads it all in one call, O(brokers) (50-100+ ms at 10 000 brokers, against
  DESIGN §9's 20 ms bound for a command); a worker stitches these steps together while each returns the same civer
  (`cluster_info_read` in service/store/routes.py), and makes clusterAddrTable of the rows' clusters (each broker
  is in exactly the cluster its data names: tests/invariants.py), so that no step reads O(brokers) members.

  KEYS:
    1 brokers      SET    {P}:brokers, all brokerNames
  ARGV:
    1 cursor over the brokers set ("0": the first step)
    2 SSCAN COUNT hint: brokers this step reads (sized by time, service/store/steps.py)
  Returns:
    {civer|"", nextCursor ("0" = done), {{brokerName, cluster, enableActingMaster, zoneName|"", {id, addr, ...}}, ...},
     elapsed}
    civer: {P}:civer read in this step, which every change to what cluster info shows renews: equal in every step
    of a read, nothing changed between them. SSCAN may return a broker twice (the worker keeps one).
    elapsed: the step's Redis time in µs (the worker sizes the next step by it)
  Side effects: none, but for a registry with brokers and no civer (written before it existed): civer is set.
    Cost O(COUNT) brokers.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { brokers = KEYS[1] }
local base = key_base(KEYS[1])

local started = rcall("TIME")
local version = cluster_info_version(base, K.brokers)
local res = rcall("SSCAN", K.brokers, ARGV[1], "COUNT", tonumber(ARGV[2]))
local brokers = {}
for _, bname in ipairs(res[2]) do
  brokers[#brokers + 1] = cluster_info_row(base, bname)
end
return { version, res[1], brokers, elapsed_us(started) }
