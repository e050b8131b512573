--[[
  Apply for a brokerId in a broker set (RocketMQ CONTROLLER_APPLY_BROKER_ID 1013; ReplicasInfoManager.applyBrokerId
  and its ApplyBrokerIdEvent in one step).

  KEYS:
    1 groups       SET    {P}:ctl:groups, every brokerName the controller knows
    2 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME; only for the alive flags of the returned view)
    2 clusterName
    3 brokerName
    4 appliedBrokerId
    5 registerCheckCode ("<brokerAddr>;<millis>"; the address is the part before ';')
  Returns:
    {code, 0, view...}: code 0 = applied (or already this broker's), 2014 = CONTROLLER_BROKER_ID_INVALID
    (an unknown set applied for an id other than 1, or the id belongs to another check code); view = the set after
    the call (lua/controller/includes/ctl.lua group_view)
  Side effects:
    An unknown set is created (cluster, next 2, master none, epochs 0, empty SyncStateSet) with id 1; a known set
    gets the id if unused, and nextAssignBrokerId += 1. Publishes nothing.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { groups = KEYS[1], alive = KEYS[2] }
local base = ctl_base(K.groups)

local now = ctl_now(ARGV[1])
local cluster, name, id, code = ARGV[2], ARGV[3], ctl_id(ARGV[4]), ARGV[5]
local addr = string.match(code, "^([^;]*)")
local kg, kr, kk = base .. "ctl:g:" .. name, base .. "ctl:r:" .. name, base .. "ctl:k:" .. name

local result = 0
if rcall("EXISTS", kg) == 0 then
  if tonumber(id) == 1 then
    rcall("HSET", kg, "cluster", cluster, "next", 2, "master", "", "mepoch", 0, "sss", "", "sepoch", 0)
    rcall("HSET", kr, id, addr)
    rcall("HSET", kk, id, code)
    rcall("SADD", K.groups, name)
  else
    result = 2014
  end
else
  local known = rcall("HGET", kk, id)
  if not known then
    rcall("HSET", kr, id, addr)
    rcall("HSET", kk, id, code)
    rcall("HINCRBY", kg, "next", 1)
  elseif known ~= code then
    result = 2014
  end
end
return prepend({ result, 0 }, group_view(base, K.alive, name, now))
