--[[
  Remove a broker set, or some of its brokerIds, from the controller (RocketMQ CLEAN_BROKER_DATA 1011;
  ReplicasInfoManager.cleanBrokerData and its CleanBrokerDataEvent in one step).

  KEYS:
    1 groups       SET    {P}:ctl:groups, every brokerName the controller knows
    2 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2 clusterName of the request ("" = none given: then no id counts as alive, as in Java)
    3 brokerName
    4 brokerControllerIdsToClean: "" = none given (blank), "=1,2" = these ids ("=" alone: given, but no ids: the
      whole set goes, as Java's empty id set does), "!" = given but not all numbers
    5 isCleanLivingBroker 1/0
  Returns:
    {code, 0, view...}: 0 = cleaned; 2009 CONTROLLER_INVALID_CLEAN_BROKER_METADATA with 0 in the second slot when
    the set is unknown, 1 when no ids were given and the set has a master, 2 when the ids are not numbers, 3 when one
    of them is alive (all only without isCleanLivingBroker)
  Side effects:
    No ids, or isCleanLivingBroker: the whole set goes. Else each id leaves the replicas and the SyncStateSet (no
    epoch moves, a removed master stays recorded, as in Java); a set left without replicas or without SyncStateSet
    members goes entirely (Java keeps the other half, which no request can use; docs/controller-protocol.md §8).
    Liveness entries are not touched. Publishes nothing.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { groups = KEYS[1], alive = KEYS[2] }
local base = ctl_base(K.groups)

local now = ctl_now(ARGV[1])
local cluster, name, ids_arg, living = ARGV[2], ARGV[3], ARGV[4], ARGV[5] == "1"
local kg, kr, kk = base .. "ctl:g:" .. name, base .. "ctl:r:" .. name, base .. "ctl:k:" .. name

local function answer(code, why)
  return prepend({ code, why }, group_view(base, K.alive, name, now))
end

local ids = nil
if not living then
  local master = rcall("HGET", kg, "master")
  if ids_arg == "" and master and master ~= "" then return answer(2009, 1) end
  if ids_arg == "!" then return answer(2009, 2) end
  if ids_arg ~= "" then
    ids = {}
    for id in string.gmatch(string.sub(ids_arg, 2), "[^,]+") do
      ids[#ids + 1] = tonumber(id)
      if ctl_alive(K.alive, cluster, name, id, now) then return answer(2009, 3) end
    end
  end
end
if rcall("EXISTS", kg) == 0 then return answer(2009, 0) end

local function drop_all()
  rcall("DEL", kg, kr, kk)
  rcall("SREM", K.groups, name)
end

if ids == nil or #ids == 0 then
  drop_all()
else
  local sss = sss_decode(rcall("HGET", kg, "sss"))
  for _, id in ipairs(ids) do
    rcall("HDEL", kr, ctl_id(id))
    rcall("HDEL", kk, ctl_id(id))
    sss[id] = nil
  end
  if rcall("HLEN", kr) == 0 or sss_size(sss) == 0 then
    drop_all()
  else
    rcall("HSET", kg, "sss", sss_encode(sss))
  end
end
return answer(0, 0)
