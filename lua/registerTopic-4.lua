--[[
  Register a topic's queue data (RocketMQ REGISTER_TOPIC_IN_NAMESRV), all or nothing.

  KEYS:
    1 topic        HASH   {P}:t:<topic>, brokerName -> queue data
    2 topics       SET    {P}:topics, all topic names
    3 brokers      SET    {P}:brokers, all brokerNames
    4 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 topic   2 queueDatas: "brokerName\tread\twrite\tperm\tsysFlag\n" repeated
  Returns:
    {n}                 number of queue data written (existing ones replaced per brokerName)
    {-3, brokerName}    BROKER_NOT_FOUND: a queue data names an unknown broker; nothing written
                        (Java may merge the ones before it; we refuse the whole call)
  Side effects:
    topic hash, topic set, reverse index; a new topic generation ({P}:tg) for each broker written. Publishes the topic on {prefix}:changes unless nothing changed.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topic = KEYS[1], topics = KEYS[2], brokers = KEYS[3], ver = KEYS[4] }
local base = key_base(KEYS[1])

local topic = ARGV[1]
local rows = {}
for b, r, w, p, s in string.gmatch(ARGV[2], "([^\t\n]+)\t(%d+)\t(%d+)\t(%d+)\t(%d+)\n") do
  if rcall("SISMEMBER", K.brokers, b) == 0 then return { -3, b } end
  rows[#rows + 1] = { b, qd_encode(r, w, p, s) }
end
if #rows == 0 then return { 0 } end
local kt = K.topic
local changed = false
for _, row in ipairs(rows) do
  if not serves(base, row[1], topic) or rcall("HGET", kt, row[1]) ~= row[2] then
    rcall("HSET", kt, row[1], row[2])
    rcall("SADD", base .. "bt:" .. row[1], topic)
    topics_touched(base, row[1])
    changed = true
  end
end
if changed then
  topic_add(base, K.topics, topic)
  local ch = changes_new()
  changes_add(ch, topic)
  changes_publish(base, K.ver, ch)
end
return { #rows }
