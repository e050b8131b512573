--[[
  One bounded step of a cluster info read (RocketMQ GET_BROKER_CLUSTER_INFO): a chunk of brokerAddrTable by SSCAN
  over the brokers set. clusterInfo-2 reads it all in one call, O(brokers) (50-100+ ms at 10 000 brokers, against
  DESIGN §9's 20 ms bound for a command); a worker stitches these steps together while each returns the same civer
  (`cluster_info_read` in service/store/routes.py), and makes clusterAddrTable of the rows' clusters (each broker
  is in exactly the cluster its data names: tests/invariants.py), so that no step reads O(brokers) members.

  A step after the first names the civer the read is at (ARGV 3): when civer moved since, the step also returns
  the rows of the brokers whose change moved it, from {P}:cilog (cluster_info_changed), so the worker replaces
  them and goes on at the new civer, instead of starting over (a rolling restart changes a broker every few ms:
  three reads in a row were disturbed and the worker read everything in one call, 44 ms at 10 000 brokers).

  KEYS:
    1 brokers      SET    {P}:brokers, all brokerNames
  ARGV:
    1 cursor over the brokers set ("0": the first step)
    2 SSCAN COUNT hint: brokers this step reads (sized by time, service/store/steps.py)
    3 the civer the read is at ("": the first step, or none)
  Returns:
    {civer|"", nextCursor ("0" = done), {{brokerName, cluster, enableActingMaster, zoneName|"", {id, addr, ...}}, ...},
     elapsed, caught, {row, ...}, {gone brokerName, ...}}
    civer: {P}:civer read in this step, which every change to what cluster info shows renews. SSCAN may return a
    broker twice (the worker keeps one).
    elapsed: the step's Redis time in µs (the worker sizes the next step by it)
    caught: 1 when civer equals ARGV 3, or {P}:cilog chains from it to civer (every renewal between logged its
      brokers): the rows and gone names that follow are every broker that changed since, as it is now; 0 when it
      cannot say (a renewal by a release before the log, or a read older than the log keeps): start over
  Side effects: none, but for a registry with brokers and no civer (written before it existed): civer is set.
    Cost O(COUNT) brokers, and O(the brokers changed since ARGV 3).
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

-- The brokers changed since ARGV[3], if {P}:cilog chains from it to the civer now.
local since = ARGV[3] or ""
local caught, rows, gone = 1, {}, {}
if since ~= version then
  caught = 0
  if since ~= "" and version ~= "" then
    local at, names, named = since, {}, {}
    for _, entry in ipairs(rcall("ZRANGEBYSCORE", base .. "cilog", "(" .. since, "+inf")) do
      local before, after, bname = string.match(entry, "^([^\t]*)\t([^\t]*)\t(.*)$")
      if after ~= at then
        if before ~= at then break end  -- a renewal that logged nothing lies between: no chain
        at = after
      end
      if bname ~= "" and not named[bname] then
        named[bname] = true
        names[#names + 1] = bname
      end
    end
    if at == version then
      caught = 1
      for _, bname in ipairs(names) do
        if rcall("SISMEMBER", K.brokers, bname) == 1 then
          rows[#rows + 1] = cluster_info_row(base, bname)
        else
          gone[#gone + 1] = bname
        end
      end
    end
  end
end
return { version, res[1], brokers, elapsed_us(started), caught, rows, gone }
