--[[
  Topic lists, one bounded page per call (RocketMQ 206, 224, 304, 311, 312, 313).

  KEYS:
    1 topics       SET    {P}:topics, all topic names
    2 brokers      SET    {P}:brokers, all brokerNames
    3 clusters     SET    {P}:clusters, all cluster names
  ARGV:
    1 mode: "all" | "cluster" | "unit" | "unitsub" | "unitsub-ununit" | "system"
    2 cursor ("0" to start)   3 page size (SSCAN COUNT hint)   4 cluster name (mode "cluster")
  Returns:
    {nextCursor ("0" = done), {topic, ...}}   for "system": {"0", {cluster and broker names}, brokerAddr|""}
    Unit modes test topicSysFlag (UNIT=1, UNIT_SUB=2) of the topic's first queue data, "first" being the
    smallest brokerName (deterministic; Java uses hash order). "cluster" pages over the cluster's brokers
    (cursor = index into its sorted members), so the caller de-duplicates.
  Side effects: none.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1], brokers = KEYS[2], clusters = KEYS[3] }
local base = key_base(KEYS[1])

local mode, cursor, count = ARGV[1], ARGV[2], tonumber(ARGV[3])

if mode == "system" then
  local names = {}
  local first_addr = ""
  for _, c in ipairs(rcall("SORT", K.clusters, "ALPHA")) do names[#names + 1] = c end
  for _, b in ipairs(rcall("SORT", K.brokers, "ALPHA")) do
    names[#names + 1] = b
    if first_addr == "" then
      local aflat = rcall("HGETALL", base .. "ba:" .. b)
      local min_i = nil
      for j = 1, #aflat, 2 do
        if min_i == nil or tonumber(aflat[j]) < tonumber(aflat[min_i]) then min_i = j end
      end
      if min_i then first_addr = aflat[min_i + 1] end
    end
  end
  return { "0", names, first_addr }
end

if mode == "cluster" then
  local members = rcall("SORT", base .. "c:" .. ARGV[4], "ALPHA")
  local i = tonumber(cursor) + 1
  if i > #members then return { "0", {} } end
  local topics = rcall("SMEMBERS", base .. "bt:" .. members[i])
  local nxt = (i < #members) and tostring(i) or "0"
  return { nxt, topics }
end

local res = rcall("SSCAN", K.topics, cursor, "COUNT", count)
if mode == "all" then return res end

local want_unit, want_sub
if mode == "unit" then want_unit = true
elseif mode == "unitsub" then want_sub = true
elseif mode == "unitsub-ununit" then want_unit, want_sub = false, true
else return redis.error_reply("ERR unknown mode " .. mode) end

local out = {}
for _, t in ipairs(res[2]) do
  local qflat = rcall("HGETALL", base .. "t:" .. t)
  local first = nil
  for i = 1, #qflat, 2 do
    if first == nil or qflat[i] < qflat[first] then first = i end
  end
  if first then
    local _, _, _, s = string.match(qflat[first + 1], "^(%d+),(%d+),(%d+),(%d+)$")
    local flag = tonumber(s)
    local unit = flag % 2 == 1
    local sub = math.floor(flag / 2) % 2 == 1
    local ok
    if mode == "unit" then ok = unit
    elseif mode == "unitsub" then ok = sub
    else ok = (not unit) and sub end
    if ok then out[#out + 1] = t end
  end
end
return { res[1], out }
