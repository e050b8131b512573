--[[
  A worker announces (or renews) its advertised remoting address for GET /rocketmq/nsaddr, with a lease on the
  Redis clock; entries whose lease ran out (workers killed without withdrawing) are dropped on the way.

  KEYS:
    1 members      ZSET   {P}:members, "addr|workerId" -> lease expiry ms (Redis clock)
  ARGV:
    1 now ms ("" = Redis TIME)
    2 member: the worker's "addr|workerId"
    3 lease ms
  Returns:
    {expiry, dropped}  the lease's new expiry (ms) and how many lapsed entries were removed
  Side effects:
    member's score := now + lease; entries with a score <= now removed; the key expires when its last lease does
    (so workers that all died leave nothing behind). Publishes nothing (routes unchanged).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { members = KEYS[1] }

local now = now_ms(ARGV[1])
local expiry = now + tonumber(ARGV[3])
local dropped = rcall("ZREMRANGEBYSCORE", K.members, "-inf", now)
rcall("ZADD", K.members, expiry, ARGV[2])
local last = rcall("ZRANGE", K.members, -1, -1, "WITHSCORES")
rcall("PEXPIRE", K.members, math.max(1, tonumber(last[2]) - now))
return { expiry, dropped }
