--[[
  Route pickup (RocketMQ GET_ROUTEINFO_BY_TOPIC, RouteInfoManager.pickupTopicRouteData).

  KEYS:
    1 topic        HASH   {P}:t:<topic>, brokerName -> queue data (shown only for brokers whose bt: holds the topic)
    2 filters      HASH   {P}:filtersrv, "cluster|addr" -> filter-server JSON list
  ARGV:
    1 topic   2 supportActingMaster "1"/"0"   3 orderMessageEnable "1"/"0"
  Returns:  (ver: the registry version {P}:ver this read reflects, for the workers' route caches)
    {0, ver}  no such topic (TOPIC_NOT_EXIST)
    {1, {brokerName, "r,w,perm,sys", ...},
        {{brokerName, cluster, enableActingMaster, zoneName|"", {id, addr, ...}}, ...},
        {addr, filterServerJSON, ...}, orderTopicConf|"", ver}
    With supportActingMaster, a broker group without id 0, with enableActingMaster, whose queue data is
    not writable, shows its lowest-id address as id 0 (in the reply only; topics rmq_sys_SYNC_BROKER_MEMBER_*
    excepted).
  Side effects: none (read only).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topic = KEYS[1], filters = KEYS[2] }
local base = key_base(KEYS[1])

local topic = ARGV[1]
local ver = tonumber(rcall("GET", base .. "ver")) or 0
local all = rcall("HGETALL", K.topic)
if #all == 0 then return { 0, ver } end

-- A broker's queue data count only while the topic is in its reverse index: a field left by a removal still being
-- swept (sweepBroker) is not shown, whether the broker is gone or registered again since.
local has_filters = rcall("HLEN", K.filters) > 0
local qflat, perms, brokers, filters = {}, {}, {}, {}
local need_acting = false
for i = 1, #all, 2 do
  local bname = all[i]
  local meta = rcall("HMGET", base .. "b:" .. bname, "cluster", "enableActingMaster", "zoneName")
  if meta[1] and serves(base, bname, topic) then
    qflat[#qflat + 1] = bname
    qflat[#qflat + 1] = all[i + 1]
    perms[bname] = qd_perm(all[i + 1])
    local aflat = rcall("HGETALL", base .. "ba:" .. bname)
    local has0 = false
    for j = 1, #aflat, 2 do
      if aflat[j] == "0" then has0 = true end
      if has_filters then
        local f = rcall("HGET", K.filters, meta[1] .. "|" .. aflat[j + 1])
        if f then
          filters[#filters + 1] = aflat[j + 1]
          filters[#filters + 1] = f
        end
      end
    end
    if #aflat > 0 and not has0 then need_acting = true end
    brokers[#brokers + 1] = { bname, meta[1], meta[2] or "0", meta[3] or "", aflat, has0 }
  end
end
if #brokers == 0 then return { 0, ver } end

if ARGV[2] == "1" and need_acting and string.sub(topic, 1, 27) ~= "rmq_sys_SYNC_BROKER_MEMBER_" then
  for _, b in ipairs(brokers) do
    local aflat = b[5]
    if #aflat > 0 and not b[6] and b[3] == "1" and not is_writable(perms[b[1]]) then
      local min_i = nil
      for j = 1, #aflat, 2 do
        if min_i == nil or tonumber(aflat[j]) < tonumber(aflat[min_i]) then min_i = j end
      end
      aflat[min_i] = "0"
    end
  end
end
for _, b in ipairs(brokers) do b[6] = nil end

local order = ""
if ARGV[3] == "1" then order = rcall("HGET", base .. "kv:ORDER_TOPIC_CONFIG", topic) or "" end
return { 1, qflat, brokers, filters, order, ver }
