--[[
  List a KV namespace (RocketMQ GET_KVLIST_BY_NAMESPACE).

  KEYS:
    1 kvns         SET    {P}:kvns, KV namespaces
    2 kv           HASH   {P}:kv:<namespace>, key -> value
  ARGV:
    1 namespace
  Returns:
    {0}                       QUERY_NOT_FOUND: namespace never used
    {1, {key, value, ...}}    (possibly empty)
  Side effects: none.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { kvns = KEYS[1], kv = KEYS[2] }
local base = key_base(KEYS[1])

if rcall("SISMEMBER", K.kvns, ARGV[1]) == 0 then return { 0 } end
return { 1, rcall("HGETALL", K.kv) }
