--[[
  List a KV namespace (RocketMQ GET_KVLIST_BY_NAMESPACE).

  KEYS:
    1 topics SET   2 brokers SET   3 clusters SET   4 live ZSET (last heartbeat)   5 deadlines ZSET
    6 filters HASH   7 ver STRING   8 kvns SET      (the registry keys; see lua/README.md)
  ARGV:
    1 namespace
  Returns:
    {0}                       QUERY_NOT_FOUND: namespace never used
    {1, {key, value, ...}}    (possibly empty)
  Side effects: none.
]]
local rcall = redis.call
--- @include "includes/common"
--- @include "includes/routekeys"

if rcall("SISMEMBER", K.kvns, ARGV[1]) == 0 then return { 0 } end
return { 1, rcall("HGETALL", base .. "kv:" .. ARGV[1]) }
