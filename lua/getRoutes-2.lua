--[[
  Route pickup of one or more topics at once (RocketMQ GET_ROUTEINFO_BY_TOPIC, RouteInfoManager.pickupTopicRouteData,
  for each): a worker's concurrent route-cache misses in one call, each broker's data looked up once for all of them
  (the topics of a cluster name the same brokers: a cold cache reading 16 routes of 100 brokers made 4 848 lookups
  one topic at a time, 318 together: tests/lua/test_store_misc.py). Every route is read at the same instant, the
  version returned.

  KEYS:
    1 topic        HASH   {P}:t:<topic> of the first topic (the others' t: keys are in the same slot, {P})
    2 filters      HASH   {P}:filtersrv, "cluster|addr" -> filter-server JSON list
  ARGV:
    1 supportActingMaster "1"/"0"   2 orderMessageEnable "1"/"0"
    3 budget: once the topics read so far hold this many queue data, the rest are left (at least one is read)
    4.. the topics
  Returns:  { ver, n, brokers, routes }
    ver: the registry version {P}:ver these reads reflect (for the workers' route caches); n: how many of the topics
    were read (the first n; the worker asks again for the rest);
    brokers: every broker any of the n routes names, once: {brokerName, cluster, enableActingMaster, zoneName|"",
      {id, addr, ...}, {addr, filterServerJSON, ...}};
    routes: per topic read, {} when there is no such topic (TOPIC_NOT_EXIST), else
      {{brokerName, "r,w,perm,sys", ...}, {brokerName, ...}, orderTopicConf|""}: its queue data (only of brokers
      whose bt: holds the topic and whose BrokerData exists) and the brokers whose lowest-id address it shows as
      id 0: with supportActingMaster, a broker group without id 0, with enableActingMaster, whose queue data of the
      topic is not writable (topics rmq_sys_SYNC_BROKER_MEMBER_* excepted); or, when that is exactly what an earlier
      topic of this call got, that topic's position (1-based): a cluster's topics, created alike, are sent once.
  Side effects: none (read only).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topic = KEYS[1], filters = KEYS[2] }
local base = key_base(KEYS[1])

local acting_on, order_on, budget = ARGV[1] == "1", ARGV[2] == "1", tonumber(ARGV[3])
local ver = tonumber(rcall("GET", base .. "ver")) or 0

-- The topics' queue data, and per broker the topics naming it (its membership is then asked once: SMISMEMBER).
local alls, asked, order_of = {}, {}, {}
local n, fields = 0, 0
for i = 4, #ARGV do
  local topic = ARGV[i]
  local all = rcall("HGETALL", base .. "t:" .. topic)
  n = n + 1
  alls[n] = all
  for j = 1, #all, 2 do group_add(asked, order_of, all[j], topic) end
  fields = fields + #all / 2
  if fields >= budget then break end
end

-- A broker's queue data of a topic count only while the topic is in its reverse index: a field left by a removal
-- still being swept (sweepBroker) is not shown, whether the broker is gone or registered again since.
local has_filters = rcall("HLEN", K.filters) > 0
local brokers, serving, has0 = {}, {}, {}
for _, b in ipairs(order_of) do
  local meta = rcall("HMGET", base .. "b:" .. b, "cluster", "enableActingMaster", "zoneName")
  if meta[1] then
    local topics = asked[b]
    local member = rcall("SMISMEMBER", base .. "bt:" .. b, unpack(topics))
    local set = {}
    for k = 1, #topics do
      if member[k] == 1 then set[topics[k]] = true end
    end
    serving[b] = set
    local aflat = rcall("HGETALL", base .. "ba:" .. b)
    local zero, filters = false, {}
    for j = 1, #aflat, 2 do
      if aflat[j] == "0" then zero = true end
      if has_filters then
        local f = rcall("HGET", K.filters, meta[1] .. "|" .. aflat[j + 1])
        if f then
          filters[#filters + 1] = aflat[j + 1]
          filters[#filters + 1] = f
        end
      end
    end
    has0[b] = zero or #aflat == 0
    brokers[#brokers + 1] = { b, meta[1], meta[2] or "0", meta[3] or "", aflat, filters }
    if meta[2] ~= "1" then has0[b] = true end  -- not rewritten: enableActingMaster off
  end
end

local routes, first_with = {}, {}
for i = 1, n do
  local topic, all = ARGV[i + 3], alls[i]
  local qflat, acting = {}, {}
  local sys_sync = string.sub(topic, 1, 27) == "rmq_sys_SYNC_BROKER_MEMBER_"
  for j = 1, #all, 2 do
    local b = all[j]
    local set = serving[b]
    if set and set[topic] then
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
    local order = ""
    if order_on then order = rcall("HGET", base .. "kv:ORDER_TOPIC_CONFIG", topic) or "" end
    local sig = table.concat(qflat, "\0") .. "\0\0" .. table.concat(acting, "\0") .. "\0\0" .. order
    local same = first_with[sig]
    if same then
      routes[i] = same
    else
      first_with[sig] = i
      routes[i] = { qflat, acting, order }
    end
  end
end
return { ver, n, brokers, routes }
