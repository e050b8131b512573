--[[
  Delete a KV config item (RocketMQ DELETE_KV_CONFIG). The namespace stays listed, even when emptied,
  so a later list returns an empty table (as Java keeps the empty map).

  KEYS:
    1 kv           HASH   {P}:kv:<namespace>, key -> value
    2 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 namespace   2 key
  Returns:
    {deleted 0/1}
  Side effects:
    ORDER_TOPIC_CONFIG deletions are published on {prefix}:changes (the key when it is a topic name).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { kv = KEYS[1], ver = KEYS[2] }
local base = key_base(KEYS[1])

local n = rcall("HDEL", K.kv, ARGV[2])
if n == 1 and ARGV[1] == "ORDER_TOPIC_CONFIG" then
  local ch = changes_new()
  if is_topic_name(ARGV[2]) then changes_add(ch, ARGV[2]) end
  changes_add_state(ch, "*")  -- every registration's answer carries this table
  changes_publish(base, K.ver, ch)
end
return { n }
