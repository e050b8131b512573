--[[
  Broker member group (RocketMQ GET_BROKER_MEMBER_GROUP): the ids and addresses of one brokerName.

  KEYS:
    1 brokerAddrs  HASH   {P}:ba:<brokerName>, brokerId -> address
  ARGV:
    none (the caller echoes the requested clusterName without checking it, as Java does)
  Returns:
    {{id, addr, ...}}  empty when the broker is unknown
  Side effects: none.
]]
local rcall = redis.call
local K = { brokerAddrs = KEYS[1] }

return { rcall("HGETALL", K.brokerAddrs) }
