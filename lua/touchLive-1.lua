--[[
  Write a worker's batch of acknowledged broker heartbeats (RocketMQ 904, BROKER_HEARTBEAT): each worker records
  them in memory and writes them here once per heartbeat_flush_ms (service/core/liveness.py), so a heartbeat costs
  no Redis round trip of its own.

  KEYS:
    1 live         ZSET   {P}:live, "cluster|addr" -> last heartbeat ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2k, 2k+1 (k >= 1) "cluster|addr", age: ms between the heartbeat's acknowledgement and this call (measured on
      the worker's monotonic clock, so workers with skewed clocks agree: the time is now - age)
  Returns:
    {refreshed, elapsed}  how many entries moved forward; the call's Redis time in µs (the worker sizes its next
    batch by it, service/store/steps.py)
  Side effects:
    live score := max(score, now - age) for an entry that is live, by ZADD XX GT (Redis >= 6.2): an entry that is
    gone (unregistered, expired, dropped by a closed connection) is not brought back, and a later registration's
    or heartbeat's time is never moved back. The expiry index ({P}:deadlines) is not written: a deadline is a
    candidate that expireBrokers re-checks against this score and repairs (lua/README.md). Publishes nothing.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { live = KEYS[1] }

local started = rcall("TIME")
local now = now_ms(ARGV[1])
local PER_ZADD = 2000  -- members per ZADD: its arguments stay within what unpack may return (Lua's C stack, 8000)
local refreshed = 0
local args = { "XX", "GT", "CH" }
for i = 2, #ARGV - 1, 2 do
  args[#args + 1] = now - tonumber(ARGV[i + 1])
  args[#args + 1] = ARGV[i]
  if #args >= 3 + 2 * PER_ZADD then
    refreshed = refreshed + rcall("ZADD", K.live, unpack(args))
    args = { "XX", "GT", "CH" }
  end
end
if #args > 3 then refreshed = refreshed + rcall("ZADD", K.live, unpack(args)) end
return { refreshed, elapsed_us(started) }
