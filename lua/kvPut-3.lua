--[[
  Put a KV config item (RocketMQ PUT_KV_CONFIG).

  KEYS:
    1 kvns         SET    {P}:kvns, KV namespaces
    2 kv           HASH   {P}:kv:<namespace>, key -> value
    3 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 namespace   2 key   3 value
  Returns:
    {1}
  Side effects:
    namespace registered in kvns; ORDER_TOPIC_CONFIG items change routes (orderTopicConf), so the
    key (when it is a topic name) is published on {prefix}:changes.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { kvns = KEYS[1], kv = KEYS[2], ver = KEYS[3] }
local base = key_base(KEYS[1])

rcall("SADD", K.kvns, ARGV[1])
local before = rcall("HGET", K.kv, ARGV[2])
rcall("HSET", K.kv, ARGV[2], ARGV[3])
if ARGV[1] == "ORDER_TOPIC_CONFIG" and before ~= ARGV[3] then
  local ch = changes_new()
  if is_topic_name(ARGV[2]) then changes_add(ch, ARGV[2]) end
  changes_add_state(ch, "*")  -- every registration's answer carries this table
  changes_publish(base, K.ver, ch)
end
return { 1 }
