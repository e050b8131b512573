--[[
  Register a broker that holds a brokerId (RocketMQ CONTROLLER_REGISTER_BROKER 1003; ReplicasInfoManager.registerBroker
  and its UpdateBrokerAddressEvent in one step).

  KEYS:
    1 groups       SET    {P}:ctl:groups, every brokerName the controller knows
    2 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2 clusterName (the request's: Java checks the master's liveness under it)
    3 brokerName
    4 brokerId
    5 brokerAddress
  Returns:
    {code, masterAlive, view...}: code 0, or 2010 = CONTROLLER_BROKER_NEED_TO_BE_REGISTERED (unknown set, or an id
    it does not hold); masterAlive 1 when the set has a master alive under the request's cluster (only then does the
    answer name the master)
  Side effects:
    A changed address replaces the stored one (the check code is kept). Publishes nothing.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { groups = KEYS[1], alive = KEYS[2] }
local base = ctl_base(K.groups)

local now = ctl_now(ARGV[1])
local cluster, name, id, addr = ARGV[2], ARGV[3], ctl_id(ARGV[4]), ARGV[5]
local kg, kr = base .. "ctl:g:" .. name, base .. "ctl:r:" .. name

if rcall("EXISTS", kg) == 0 or rcall("HEXISTS", kr, id) == 0 then
  return prepend({ 2010, 0 }, group_view(base, K.alive, name, now))
end
local master = rcall("HGET", kg, "master")
local master_alive = 0
if master ~= "" and ctl_alive(K.alive, cluster, name, master, now) then master_alive = 1 end
-- Java answers from the state before its UpdateBrokerAddress event applies: a master that moved is told its old
-- address this once (the next answer has the new one)
local view = group_view(base, K.alive, name, now)
if rcall("HGET", kr, id) ~= addr then rcall("HSET", kr, id, addr) end
return prepend({ 0, master_alive }, view)
