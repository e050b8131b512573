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
    "all" adds tlver|"": {P}:tlver as this page reflects it, which every change to the topic set renews: pages
    that all read one value make exactly the set at that value (a worker keeps it: service/core/topic_lists.py)
    Unit modes test topicSysFlag (UNIT=1, UNIT_SUB=2) of the topic's first queue data, and "system" takes the
    lowest-id address of the first broker: "first" in Java's HashMap order of the brokerNames (String.hashCode,
    spread, in a table grown from 16 by puts; ties, which Java breaks by insertion order, by name), as
    service/javaorder.py orders a route's lists. "cluster" pages over the cluster's brokers
    (cursor = index into its sorted members), so the caller de-duplicates.
  Side effects: none, but for mode "all" on a registry with topics and no tlver (written before it existed):
    tlver is set.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1], brokers = KEYS[2], clusters = KEYS[3] }
local base = key_base(KEYS[1])

local mode, cursor, count = ARGV[1], ARGV[2], tonumber(ARGV[3])

-- Java's HashMap order (service/javaorder.py): bucket = (h ^ (h >>> 16)) & (size - 1), h = String.hashCode.
-- Names are ASCII (topics, brokerNames), so bytes are UTF-16 units; plain arithmetic (no bit library needed).
local function bxor(a, b)
  local r, p = 0, 1
  while a > 0 or b > 0 do
    local x, y = a % 2, b % 2
    if x ~= y then r = r + p end
    a, b, p = (a - x) / 2, (b - y) / 2, p * 2
  end
  return r
end
local function table_size(n)
  local cap = 16
  while n > cap * 0.75 do cap = cap * 2 end
  return cap
end
local function bucket(s, size)
  local h = 0
  for i = 1, #s do h = (31 * h + string.byte(s, i)) % 4294967296 end
  return bxor(h % size, math.floor(h / 65536) % size)
end
-- true when name a comes before name b in a HashMap of `size`
local function before(a, b, size)
  local ba, bb = bucket(a, size), bucket(b, size)
  if ba ~= bb then return ba < bb end
  return a < b
end

if mode == "system" then
  local names = {}
  local first_addr = ""
  for _, c in ipairs(rcall("SORT", K.clusters, "ALPHA")) do names[#names + 1] = c end
  local brokers = rcall("SORT", K.brokers, "ALPHA")
  local size = table_size(#brokers)
  local first = nil
  for _, b in ipairs(brokers) do
    names[#names + 1] = b
    local aflat = rcall("HGETALL", base .. "ba:" .. b)
    if #aflat > 0 and (first == nil or before(b, first, size)) then
      first = b
      local min_i = nil
      for j = 1, #aflat, 2 do
        if min_i == nil or tonumber(aflat[j]) < tonumber(aflat[min_i]) then min_i = j end
      end
      first_addr = aflat[min_i + 1]
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
if mode == "all" then
  -- A registry written before tlver existed (by an earlier release) has topics and none: start it here, or no
  -- worker could keep a copy until a topic came or went.
  if rcall("EXISTS", base .. "tlver") == 0 and rcall("SCARD", K.topics) > 0 then topic_list_changed(base) end
  return { res[1], res[2], rcall("GET", base .. "tlver") or "" }
end

local want_unit, want_sub
if mode == "unit" then want_unit = true
elseif mode == "unitsub" then want_sub = true
elseif mode == "unitsub-ununit" then want_unit, want_sub = false, true
else return redis.error_reply("ERR unknown mode " .. mode) end

local out = {}
for _, t in ipairs(res[2]) do
  local qflat = {}
  local all = rcall("HGETALL", base .. "t:" .. t)
  for i = 1, #all, 2 do
    if serves(base, all[i], t) then
      qflat[#qflat + 1] = all[i]
      qflat[#qflat + 1] = all[i + 1]
    end
  end
  local first = nil
  local size = table_size(#qflat / 2)
  for i = 1, #qflat, 2 do
    if first == nil or before(qflat[i], qflat[first], size) then first = i end
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
