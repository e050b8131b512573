--[[
  Expire brokers whose heartbeat is older than their timeout (RocketMQ scanNotActiveBroker), one batch.

  KEYS:
    1 topics       SET    {P}:topics, all topic names
    2 brokers      SET    {P}:brokers, all brokerNames
    3 clusters     SET    {P}:clusters, all cluster names
    4 live         ZSET   {P}:live, "cluster|addr" -> last heartbeat ms
    5 deadlines    ZSET   {P}:deadlines, "cluster|addr" -> a last heartbeat + timeout ms (a candidate: never later
                          than the live score + timeout, since touchLive-1 moves only the live score)
    6 filters      HASH   {P}:filtersrv, "cluster|addr" -> filter-server JSON list
    7 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 batch: at most this many due entries are examined (bounded work per call)
    2 now ms ("" = Redis TIME)
    3 topic budget: stop early once the expired brokers' topics add up to this (bounds the block when
      brokers carry many topics)
    4 default heartbeat timeout ms (for an entry that lacks its own)
    5 sweep bound: a broker with more topics is removed in steps (sweepBroker-3) and counts as this many against
      the budget; "" or 0 = never
    6 grace ms ("" = 0): an entry expires only this long after its deadline (workers write the heartbeats they
      acknowledged in batches, touchLive-1, at most this late)
  Returns:
    {more 0/1, {member, brokerName, ...}, {sweepId, ...}, spent, elapsed}  more = 1 when the batch or the budget
    ran out (call again); the sweeps queued for brokers past the bound; the topics (and entries) it spent of the
    budget and its Redis time in µs (the worker sizes the next budget by them)
  Side effects:
    Each due entry is re-checked against its live score + its timeout (a broker that heartbeated since its
    deadline was written, by the batched heartbeats that write no deadline or a moment ago, RocketMQ #11043, is
    kept and its deadline repaired, counting 1 against the budget); an expired one is unregistered as
    unregisterBroker does. Publishes changed topics. An empty scan costs O(log n) (one ZRANGEBYSCORE).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1], brokers = KEYS[2], clusters = KEYS[3], live = KEYS[4], deadlines = KEYS[5], filters = KEYS[6], ver = KEYS[7] }
local base = key_base(KEYS[1])
--- @include "includes/brokers"

local started = rcall("TIME")
local batch = tonumber(ARGV[1])
local now = now_ms(ARGV[2])
local budget = tonumber(ARGV[3])
local default_timeout = ARGV[4]
local defer = tonumber(ARGV[5] or "")
local sweeps = {}
local spent = 0
local more = 0
local grace = tonumber(ARGV[6] or "") or 0
local due = rcall("ZRANGEBYSCORE", K.deadlines, "-inf", "(" .. (now - grace), "LIMIT", 0, batch)
local ch = changes_new()
local out = {}
for i, member in ipairs(due) do
  if spent >= budget then
    more = 1
    break
  end
  local kl = base .. "l:" .. member
  local last = rcall("ZSCORE", K.live, member)
  local timeout = tonumber(rcall("HGET", kl, "timeout") or default_timeout)
  if last and tonumber(last) + timeout + grace >= now then
    rcall("ZADD", K.deadlines, tonumber(last) + timeout, member)
    spent = spent + 1
  else
    local cluster, addr = string.match(member, "^([^|]*)|(.*)$")
    local name = rcall("HGET", kl, "name")
    if name then
      local n = rcall("SCARD", base .. "bt:" .. name)
      if defer and defer > 0 and n > defer then n = defer end
      spent = spent + n
    end
    spent = spent + 1
    local sweep = drop_live(base, K, cluster, addr, ch, name, defer)
    if sweep then sweeps[#sweeps + 1] = sweep end
    if name then
      local _, s = remove_addr(base, K, cluster, name, addr, ch, defer)
      if s then sweeps[#sweeps + 1] = s end
    end
    out[#out + 1] = member
    out[#out + 1] = name or ""
  end
end
changes_publish(base, K.ver, ch)
if #due == batch then more = 1 end
return { more, out, sweeps, spent, elapsed_us(started) }
