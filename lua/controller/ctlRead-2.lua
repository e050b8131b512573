--[[
  Read broker sets for CONTROLLER_GET_REPLICA_INFO 1004, CONTROLLER_GET_SYNC_STATE_DATA 1006,
  CONTROLLER_GET_NEXT_BROKER_ID 1012 and the admin views: each set's records and its replicas' liveness, read at one
  instant.

  KEYS:
    1 groups       SET    {P}:ctl:groups, every brokerName the controller knows
    2 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2.. brokerNames (none = every set the controller knows, in name order)
  Returns:
    {view, view, ...} one group view per name (lua/controller/includes/ctl.lua group_view: {0} for an unknown
    name), prefixed by the name: {name, exists, cluster, ...}
  Side effects:
    None.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { groups = KEYS[1], alive = KEYS[2] }
local base = ctl_base(K.groups)

local now = ctl_now(ARGV[1])
local names = {}
for i = 2, #ARGV do names[#names + 1] = ARGV[i] end
if #names == 0 then
  names = rcall("SMEMBERS", K.groups)
  table.sort(names)
end
local out = {}
for _, name in ipairs(names) do
  out[#out + 1] = prepend({ name }, group_view(base, K.alive, name, now))
end
return out
