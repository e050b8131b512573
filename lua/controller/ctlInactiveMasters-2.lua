--[[
  Find broker sets whose master is not alive while another of their replicas is
  (ReplicasInfoManager.scanNeedReelectBrokerSets), a page of the set of sets at a time: the safety net behind
  ctlExpire for an election a worker died before making.

  KEYS:
    1 groups       SET    {P}:ctl:groups, every brokerName the controller knows
    2 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2 SSCAN cursor ("0" to start)
    3 SSCAN COUNT hint
  Returns:
    {next cursor ("0" = done), {brokerName, masterEpoch, ...}}
  Side effects:
    None.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { groups = KEYS[1], alive = KEYS[2] }
local base = ctl_base(K.groups)

local now = ctl_now(ARGV[1])
local page = rcall("SSCAN", K.groups, ARGV[2], "COUNT", tonumber(ARGV[3]))
local out = {}
local names = page[2]
table.sort(names)
for _, name in ipairs(names) do
  local g = rcall("HMGET", base .. "ctl:g:" .. name, "cluster", "master", "mepoch")
  if g[1] and g[2] ~= "" and not ctl_alive(K.alive, g[1], name, g[2], now) then
    for _, id in ipairs(replica_ids(base .. "ctl:r:" .. name)) do
      if ctl_alive(K.alive, g[1], name, id, now) then
        out[#out + 1] = name
        out[#out + 1] = tonumber(g[3])
        break
      end
    end
  end
end
return { page[1], out }
