--[[
  A native connection closed (RocketMQ BrokerHousekeepingService.onChannelDestroy): unregister the brokers
  that registered on it, unless they have registered again since, through another connection, worker or door.

  KEYS:
    1 topics       SET    {P}:topics, all topic names
    2 brokers      SET    {P}:brokers, all brokerNames
    3 clusters     SET    {P}:clusters, all cluster names
    4 live         ZSET   {P}:live, "cluster|addr" -> last heartbeat ms
    5 deadlines    ZSET   {P}:deadlines, "cluster|addr" -> last heartbeat + timeout ms
    6 filters      HASH   {P}:filtersrv, "cluster|addr" -> filter-server JSON list
    7 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 connection id (as registerBroker's ARGV 17 stored it)
    2 sweep bound: a broker with more topics is removed in steps (sweepBroker-3); "" or 0 = never
    3.. pairs: clusterName, brokerAddr of each broker that registered on that connection
  Returns:
    {{clusterName, brokerAddr, brokerName, result, ...}, {sweepId, ...}}: each entry removed, result as
    unregisterBroker's (1 removed, 2 reduced); the sweeps queued for brokers past the bound. An entry whose live
    info names another connection (or none) is left alone.
  Side effects:
    as unregisterBroker for each removed entry; publishes the changed topics on {prefix}:changes.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1], brokers = KEYS[2], clusters = KEYS[3], live = KEYS[4], deadlines = KEYS[5], filters = KEYS[6], ver = KEYS[7] }
local base = key_base(KEYS[1])
--- @include "includes/brokers"

local conn = ARGV[1]
local defer = tonumber(ARGV[2] or "")
local ch = changes_new()
local out, sweeps = {}, {}
for i = 3, #ARGV - 1, 2 do
  local cluster, addr = ARGV[i], ARGV[i + 1]
  local kl = base .. "l:" .. cluster .. "|" .. addr
  local info = rcall("HMGET", kl, "conn", "name")
  if info[1] == conn and conn ~= "" and info[2] then
    local res, sweep = remove_addr(base, K, cluster, info[2], addr, ch, defer)
    if sweep then sweeps[#sweeps + 1] = sweep end
    sweep = drop_live(base, K, cluster, addr, ch, info[2], defer)
    if sweep then sweeps[#sweeps + 1] = sweep end
    out[#out + 1] = cluster
    out[#out + 1] = addr
    out[#out + 1] = info[2]
    out[#out + 1] = res
  end
end
changes_publish(base, K.ver, ch)
return { out, sweeps }
