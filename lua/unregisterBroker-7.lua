--[[
  Unregister a broker address (RocketMQ UNREGISTER_BROKER), synchronously and atomically.

  KEYS:
    1 topics       SET    {P}:topics, all topic names
    2 brokers      SET    {P}:brokers, all brokerNames
    3 clusters     SET    {P}:clusters, all cluster names
    4 live         ZSET   {P}:live, "cluster|addr" -> last heartbeat ms
    5 deadlines    ZSET   {P}:deadlines, "cluster|addr" -> last heartbeat + timeout ms
    6 filters      HASH   {P}:filtersrv, "cluster|addr" -> filter-server JSON list
    7 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 clusterName   2 brokerName   3 brokerId (informational)   4 brokerAddr
    5 sweep bound: a broker with more topics is removed in steps (sweepBroker-3); "" or 0 = never
  Returns:
    {result, {sweepId, ...}}
              result 0 = the address is not a member of that broker: nothing changes (a stale or mistaken
                  unregister cannot orphan another broker's address; Java drops the liveness anyway),
              1 = broker removed (no address left; empty topics and cluster removed too),
              2 = broker reduced (other ids remain; acting-master rule may clear WRITE)
  Side effects:
    removes liveness and filter servers of (cluster, addr); every id whose address is brokerAddr
    (RocketMQ #5374); renews {P}:civer (the cluster info changed). Publishes the broker's topics on
    {prefix}:changes. Cost O(the broker's topics), or O(1) past the sweep bound: then "@brokerName" is published
    and the sweeps it returns do the rest in bounded steps.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1], brokers = KEYS[2], clusters = KEYS[3], live = KEYS[4], deadlines = KEYS[5], filters = KEYS[6], ver = KEYS[7] }
local base = key_base(KEYS[1])
--- @include "includes/brokers"

local cluster, name, addr = ARGV[1], ARGV[2], ARGV[4]
local defer = tonumber(ARGV[5] or "")
local ch = changes_new()
local sweeps = {}
local res, sweep = remove_addr(base, K, cluster, name, addr, ch, defer)
if sweep then sweeps[#sweeps + 1] = sweep end
if res ~= 0 then
  sweep = drop_live(base, K, cluster, addr, ch, name, defer)
  if sweep then sweeps[#sweeps + 1] = sweep end
end
changes_publish(base, K.ver, ch)
return { res, sweeps }
