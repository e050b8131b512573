--[[
  Expire controller heartbeats past their deadline (DefaultBrokerHeartbeatManager.scanNotActiveBroker), one batch,
  and name the broker sets whose master was among them (ControllerManager.onBrokerInactive), so the worker that
  removed the entry, and only that one, triggers the election.

  KEYS:
    1 groups       SET    {P}:ctl:groups, every brokerName the controller knows
    2 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2 batch: at most this many due entries are removed per call
  Returns:
    {more 0/1, {member, ...}, {brokerName, masterEpoch, ...}}: more = 1 when the batch ran out (call again); the
    expired members; each set whose current master expired, with the master epoch to base its election on
  Side effects:
    Removes each due member from alive and its ctl:h: hash. An empty scan costs O(log n). Publishes nothing.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { groups = KEYS[1], alive = KEYS[2] }
local base = ctl_base(K.groups)

local now = ctl_now(ARGV[1])
local batch = tonumber(ARGV[2])
local due = rcall("ZRANGEBYSCORE", K.alive, "-inf", "(" .. now, "LIMIT", 0, batch)
local expired, elect, seen = {}, {}, {}
for _, member in ipairs(due) do
  end_liveness(base, K.alive, member, elect, seen)
  expired[#expired + 1] = member
end
local more = 0
if #due == batch then more = 1 end
return { more, expired, elect }
