--[[
  A connection closed: end the liveness of the brokers whose latest controller heartbeat came on it (Java's
  BrokerHousekeepingService -> onBrokerChannelClose), and name the sets whose master that was, as ctlExpire does,
  so the closing worker elects at once instead of after the heartbeat timeout.

  KEYS:
    1 groups       SET    {P}:ctl:groups, every brokerName the controller knows
    2 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 connection id
    2.. members "cluster|brokerName|brokerId" that heartbeated on it
  Returns:
    {{member, ...}, {brokerName, masterEpoch, ...}}: the members whose liveness ended (a member whose latest
    heartbeat came on another connection is kept); each set whose current master was among them, with its epoch
  Side effects:
    Removes those members from alive and their ctl:h: hashes. Publishes nothing.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { groups = KEYS[1], alive = KEYS[2] }
local base = ctl_base(K.groups)

local conn = ARGV[1]
local dropped, elect, seen = {}, {}, {}
for i = 2, #ARGV do
  local member = ARGV[i]
  if rcall("HGET", base .. "ctl:h:" .. member, "conn") == conn then
    end_liveness(base, K.alive, member, elect, seen)
    dropped[#dropped + 1] = member
  end
end
return { dropped, elect }
