--[[
  Delete a topic's routes (RocketMQ DELETE_TOPIC_IN_NAMESRV), everywhere or in one cluster.

  KEYS:
    1 topic        HASH   {P}:t:<topic>, brokerName -> queue data
    2 topics       SET    {P}:topics, all topic names
    3 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 topic   2 clusterName ("" = all clusters)
  Returns:
    {removedQueueDatas}  0 when the topic or cluster is unknown (a no-op, as in Java)
  Side effects:
    HDEL of the queue data of each broker (of the cluster), reverse index kept equal, topic dropped when
    empty; each broker that lost queue data gets a new topic generation ({P}:tg). Publishes the topic on {prefix}:changes.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topic = KEYS[1], topics = KEYS[2], ver = KEYS[3] }
local base = key_base(KEYS[1])

local topic, cluster = ARGV[1], ARGV[2]
local kt = K.topic
local removed = 0
local names
if cluster == "" then
  names = rcall("HKEYS", kt)
else
  names = rcall("SMEMBERS", base .. "c:" .. cluster)
end
for _, bname in ipairs(names) do
  local visible = serves(base, bname, topic)  -- a field a sweep has yet to clear is deleted, not counted
  if rcall("HDEL", kt, bname) == 1 and visible then
    removed = removed + 1
    rcall("SREM", base .. "bt:" .. bname, topic)
    topics_touched(base, bname)
  end
end
topic_drop_if_unserved(base, K.topics, kt, topic)
if removed > 0 then
  local ch = changes_new()
  changes_add(ch, topic)
  changes_publish(base, K.ver, ch)
end
return { removed }
