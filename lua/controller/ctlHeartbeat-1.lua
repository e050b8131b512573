--[[
  Controller heartbeat (RocketMQ BROKER_HEARTBEAT 904 with a brokerId): refresh one broker's liveness and the
  data the elect policy sorts by (DefaultBrokerHeartbeatManager.onBrokerHeartbeat).

  KEYS:
    1 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2 clusterName
    3 brokerName
    4 brokerId
    5 brokerAddr
    6 heartbeat timeout ms ("" = 10000, the controller's default)
    7 epoch ("" = -1)
    8 maxOffset ("" = -1)
    9 confirmOffset ("" = -1)
    10 electionPriority ("" = 2147483647)
    11 connection id the heartbeat came on ("" = none): a close of that connection ends the liveness
  Returns:
    1 when a new liveness entry was made, 0 when an existing one was refreshed
  Side effects:
    alive score := now + timeout; ctl:h:<member> holds addr, timeout, prio (always replaced) and epoch, off,
    conf (replaced only when epoch is newer, or equal with a larger maxOffset: election data never goes back), conn
    (the latest connection; Java keeps the first channel, but with several workers a broker's live connection is the
    one it heartbeats on now).
    The broker need not be known to the controller (as in Java). Publishes nothing.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { alive = KEYS[1] }
local base = ctl_base(K.alive)

local function arg_or(i, default)
  if ARGV[i] == nil or ARGV[i] == "" then return default end
  return tonumber(ARGV[i])
end

local now = ctl_now(ARGV[1])
local member = ctl_member(ARGV[2], ARGV[3], ARGV[4])
local timeout = arg_or(6, 10000)
local epoch = arg_or(7, -1)
local off = arg_or(8, -1)
local conf = arg_or(9, -1)
local prio = arg_or(10, 2147483647)
local kh = base .. "ctl:h:" .. member

local created = 0
local old = rcall("HMGET", kh, "epoch", "off")
if not old[1] then
  created = 1
  rcall("HSET", kh, "epoch", epoch, "off", off, "conf", conf)
elseif epoch > tonumber(old[1]) or (epoch == tonumber(old[1]) and off > tonumber(old[2])) then
  rcall("HSET", kh, "epoch", epoch, "off", off, "conf", conf)
end
rcall("HSET", kh, "addr", ARGV[5], "timeout", timeout, "prio", prio, "conn", ARGV[11] or "")
rcall("ZADD", K.alive, now + timeout, member)
return created
