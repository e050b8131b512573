--[[
  Route pickup of one or more topics at once (RocketMQ GET_ROUTEINFO_BY_TOPIC, RouteInfoManager.pickupTopicRouteData,
  for each): a worker's concurrent route-cache misses in one call, each broker's data taken once for all of them,
  from the brokers' lines while they are current (the topics of a cluster name the same brokers: a cold cache
  reading 16 routes of 100 brokers made 4 848 lookups one topic at a time; together, 23 commands with the lines,
  222 without: tests/lua/test_store_misc.py), and a topic whose queue data are exactly an earlier one's answered as
  that one without a walk (500 brokers x 64 topics a call: 21 -> 6 ms of Redis). Every route is read at the same
  instant, the version returned.

  KEYS:
    1 topic        HASH   {P}:t:<topic> of the first topic (the others' t: keys are in the same slot, {P})
    2 filters      HASH   {P}:filtersrv, "cluster|addr" -> filter-server JSON list
  ARGV:
    1 supportActingMaster "1"/"0"   2 orderMessageEnable "1"/"0"
    3 budget: once the topics read so far cost this much, the rest are left (at least one is read): a queue data
      walked costs 1, a broker looked up 2 more, a queue data of a topic answered as an earlier one 1/16 (500 brokers
      x 64 topics a call, quiet host: a walked route ~1.5 ms of Redis with its brokers, a topic answered as another
      ~0.07 ms)
    4.. the topics
  Returns:  { ver, n, brokers, routes, filters }
    ver: the registry version {P}:ver these reads reflect (for the workers' route caches); n: how many of the topics
    were read (the first n; the worker asks again for the rest);
    brokers: every broker any of the n routes names, once, as a line "brokerName\tcluster\tenableActingMaster\t
      zoneName\tid,addr,id,addr..." (names and addresses hold neither tab nor comma: validated; one string a broker,
      where a nested array a broker took a quarter of a 500-broker call's Redis time to build and send);
    routes: per topic read, {} when there is no such topic (TOPIC_NOT_EXIST), else
      {"brokerName\tr,w,perm,sys\tbrokerName\t...", {brokerName, ...}, orderTopicConf|""}: its queue data (only of
      brokers whose bt: holds the topic and whose BrokerData exists) and the brokers whose lowest-id address it
      shows as id 0: with supportActingMaster, a broker group without id 0, with enableActingMaster, whose queue
      data of the topic is not writable (topics rmq_sys_SYNC_BROKER_MEMBER_* excepted); or, when that is exactly
      what an earlier topic of this call got, that topic's position (1-based): a cluster's topics, created alike,
      are sent once;
    filters: {brokerName, addr, filterServerJSON, ...} of those brokers (empty unless filter servers registered).
  Side effects: none (read only).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topic = KEYS[1], filters = KEYS[2] }
local base = key_base(KEYS[1])

local acting_on, order_on, budget = ARGV[1] == "1", ARGV[2] == "1", tonumber(ARGV[3])
local ver = tonumber(rcall("GET", base .. "ver")) or 0

-- Brokers with a removal still being swept (kind "r": their reverse index was renamed to sw:<id>, and the sweep
-- deletes their fields): only theirs can have a field of t:<topic> outside bt:<brokerName>, so only their membership
-- is asked (SMISMEMBER); every other broker's fields all count. Read once: nothing is swept on a cold start.
local swept = {}
for _, job in ipairs(rcall("HVALS", base .. "sweeps")) do
  local kind, name = string.match(job, "^(%a)\t([^\t]*)\t")
  if kind == "r" then swept[name] = true end
end
local sweeping = next(swept) ~= nil

-- The topics' queue data. A topic whose fields (and system-sync prefix and order config) are exactly an earlier
-- topic's of this call gets that topic's reply without a walk of its own (a cluster's topics, created alike: a
-- 500-broker route took ~0.3 ms of Lua per topic to walk), unless a removal is being swept (then the fields alone do
-- not say what a topic shows); the others' brokers are gathered, and per swept broker the topics naming it.
local order_on_topics = {}
local alls, asked, order_of, same_as, raw_first = {}, {}, {}, {}, {}
local n, cost = 0, 0
for i = 4, #ARGV do
  local topic = ARGV[i]
  local all = rcall("HGETALL", base .. "t:" .. topic)
  n = n + 1
  local order = ""
  if order_on and #all > 0 then order = rcall("HGET", base .. "kv:ORDER_TOPIC_CONFIG", topic) or "" end
  order_on_topics[n] = order
  local first = nil
  if #all > 0 and not sweeping then
    local sys_sync = string.sub(topic, 1, 27) == "rmq_sys_SYNC_BROKER_MEMBER_"
    local raw = (sys_sync and "s" or "") .. "\0" .. order .. "\0" .. table.concat(all, "\0")
    first = raw_first[raw]
    if not first then raw_first[raw] = n end
  end
  if first then
    same_as[n] = first
    cost = cost + #all / 32
  else
    alls[n] = all
    for j = 1, #all, 2 do
      local b = all[j]
      if swept[b] then
        if asked[b] == nil then cost = cost + 2 end
        group_add(asked, order_of, b, topic)
      elseif asked[b] == nil then
        asked[b] = false
        order_of[#order_of + 1] = b
        cost = cost + 2
      end
    end
    cost = cost + #all / 2
  end
  if cost >= budget then break end
end

-- A broker's queue data of a topic count only while the topic is in its reverse index: a field left by a removal
-- still being swept (sweepBroker) is not shown, whether the broker is gone or registered again since.
-- The brokers' lines come from {P}:bl while it is current (broker_lines_flush in includes/common): one HMGET for all
-- of them; a broker without a line there is looked up, and all are while filter servers are registered (routes
-- carry them by address).
local has_filters = rcall("HLEN", K.filters) > 0
local lines = {}
if not has_filters and #order_of > 0 then
  local civer = rcall("GET", base .. "civer")
  if civer and rcall("HGET", base .. "bl", "#") == civer then
    for i = 1, #order_of, 4000 do
      local got = rcall("HMGET", base .. "bl", unpack(order_of, i, math.min(i + 3999, #order_of)))
      for j = 1, #got do lines[i + j - 1] = got[j] end
    end
  end
end
local brokers, serving, has0, filters = {}, {}, {}, {}
for idx, b in ipairs(order_of) do
  local line, meta, aflat = lines[idx], nil, nil
  if not line then line, meta, aflat = broker_line(base, b) end
  if line then
    local topics = asked[b]
    if topics then
      local member = rcall("SMISMEMBER", base .. "bt:" .. b, unpack(topics))
      local set = {}
      for k = 1, #topics do
        if member[k] == 1 then set[topics[k]] = true end
      end
      serving[b] = set
    else
      serving[b] = true
    end
    if acting_on then  -- shown with an acting master unless enableActingMaster is off or it has id 0 (or no id)
      local _, _, eam, _, addrs = string.match(line, "^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
      has0[b] = eam ~= "1" or addrs == "" or string.find("," .. addrs .. ",", ",0,", 1, true) ~= nil
    end
    if has_filters then
      for j = 1, #aflat, 2 do
        local f = rcall("HGET", K.filters, meta[1] .. "|" .. aflat[j + 1])
        if f then
          filters[#filters + 1] = b
          filters[#filters + 1] = aflat[j + 1]
          filters[#filters + 1] = f
        end
      end
    end
    brokers[#brokers + 1] = line
  end
end

local routes, first_with = {}, {}
for i = 1, n do
  local topic, all = ARGV[i + 3], alls[i]
  if all == nil then
    local first = same_as[i]
    local r = routes[first]
    if type(r) == "number" or #r == 0 then routes[i] = r else routes[i] = first end
  else
    local qflat, acting = {}, {}
    local sys_sync = string.sub(topic, 1, 27) == "rmq_sys_SYNC_BROKER_MEMBER_"
    for j = 1, #all, 2 do
      local b = all[j]
      local set = serving[b]
      if set == true or (set and set[topic]) then
        qflat[#qflat + 1] = b
        qflat[#qflat + 1] = all[j + 1]
        if acting_on and not has0[b] and not sys_sync and not is_writable(qd_perm(all[j + 1])) then
          acting[#acting + 1] = b
        end
      end
    end
    if #qflat == 0 then
      routes[i] = {}
    else
      local order = order_on_topics[i]
      local qline = table.concat(qflat, "\t")
      local sig = qline .. "\0" .. table.concat(acting, "\t") .. "\0" .. order
      local same = first_with[sig]
      if same then
        routes[i] = same
      else
        first_with[sig] = i
        routes[i] = { qline, acting, order }
      end
    end
  end
end
return { ver, n, brokers, routes, filters }
