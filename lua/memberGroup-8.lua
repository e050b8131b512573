--[[
  Broker member group (RocketMQ GET_BROKER_MEMBER_GROUP): the ids and addresses of one brokerName.

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV:
    1 clusterName (echoed by the caller, not checked: as Java)   2 brokerName
  Returns:
    {{id, addr, ...}}  empty when the broker is unknown
  Side effects: none.
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

return { rcall("HGETALL", base .. "ba:" .. ARGV[2]) }
