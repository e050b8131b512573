--[[
  The announced members whose lease is still running (GET /rocketmq/nsaddr), read on the Redis clock so that
  workers with skewed clocks agree; lapsed entries are left for the next announceMember to remove (read only).

  KEYS:
    1 members      ZSET   {P}:members, "addr|workerId" -> lease expiry ms (Redis clock)
  ARGV:
    1 now ms ("" = Redis TIME)
  Returns:
    {member, ...}  every "addr|workerId" whose expiry is after now, in ZSET order
  Side effects:
    none (reads only).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { members = KEYS[1] }

local now = now_ms(ARGV[1])
return rcall("ZRANGEBYSCORE", K.members, "(" .. now, "+inf")
