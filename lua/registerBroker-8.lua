--[[
  Register a broker (RocketMQ REGISTER_BROKER, RouteInfoManager.registerBroker, 5.x semantics).

  KEYS:
    1 topics       SET    {P}:topics, all topic names
    2 brokers      SET    {P}:brokers, all brokerNames
    3 clusters     SET    {P}:clusters, all cluster names
    4 live         ZSET   {P}:live, "cluster|addr" -> last heartbeat ms
    5 deadlines    ZSET   {P}:deadlines, "cluster|addr" -> last heartbeat + timeout ms
    6 filters      HASH   {P}:filtersrv, "cluster|addr" -> filter-server JSON list
    7 ver          STRING {P}:ver, registry version counter
    8 kvns         SET    {P}:kvns, KV namespaces
  ARGV:
    1 clusterName   2 brokerName   3 brokerId (decimal)   4 brokerAddr   5 haServerAddr
    6 zoneName ("" = none)   7 enableActingMaster ("1", "0", "" = header absent: old broker)
    8 heartbeatTimeoutMillis   9 dataVersion "timestamp,counter,stateVersion"   10 stateVersion
    11 deleteTopicWithBrokerRegistration "1"/"0"   12 returnOrderTopicConfigToBroker "1"/"0"
    13 single-topic guard "1"/"0" (native protocol only)
    14 filterServerList: "-" = absent (leave), otherwise a JSON list ("[]" removes)
    15 topics, grouped by queue data (as stored): "read,write,perm,sysFlag\tname\tname...\n" repeated
    16 now ms ("" = Redis TIME)
    17 connection id: the native connection this registration came on ("" = none, e.g. HTTP); a later
       close of that connection removes the broker only while this id is still the registered one
    18 cross-cluster guard "1"/"0" (a cluster-bound credential): refuse an address a live broker of another
       cluster holds, and a topic (of ARGV 19) that has queues only on other clusters' brokers
    19 topics the guard checks: "name\n" repeated (the payload's non-system topics); in unchanged mode "*" = the
       payload's topics would be checked, "" = none
    20 digest of the registration as received ("" = none): SHA-256 of the door's header fields, the default
       timeout and the raw body (service/core/bodies.py says why that is safe). Recorded with the
       registration so that the same bytes again can take the unchanged path
    21 mode: "1" = unchanged: ARGV 1-10, 14 and 15 are not sent; the registration recorded under the digest of
       ARGV 20 is replayed without its topics, if nothing that could change their outcome happened since;
       otherwise {3} and nothing is written. "0" or absent = a full registration
    22 unchanged mode: the clusters the credential may write, "name\n" repeated ("" = any); another gives {3}
    23 begin mode: the registration id that fences its chunks (unique per registration)
    24 delta mode: the digest of the registration the delta is relative to (its base)
    25 delta mode: the topics of the base whose queue data this registration changes, grouped as ARGV 15
    26 delta mode: the topics of the base this registration no longer names, "name\n" repeated
    27 delta mode: the topics the base does not name, grouped as ARGV 15
  Modes (ARGV 21): "0" full, "1" unchanged, "2" begin a chunked registration (service/store/chunked.py): every step
    but the topics (ARGV 15 and 19 are "": the worker sends the topics in bounded chunks, registerChunk, checks the
    guard's topics before, guardTopics, and ends with registerFinish). A broker whose topics it applies (master,
    prime slave) is marked pending in `rg` of its BrokerData and live info: chunks carry the id and are refused
    once another registration (or an unregister, an expiry) replaced it, so two registrations of one broker never
    mix their tables; a new generation is taken at once, and the digest is recorded only when it ends.
    "3" delta: a full registration (ARGV 1-20) sent with what its topic table changes against an earlier one of
    the same header, its base (ARGV 24-27). While this id still holds the address and the live info's `td` says
    the broker's queue data are exactly the base's table (recorded with the topic token in force then: any change
    to them since took a new generation), only the delta is written: the changed topics without reading them, the
    added ones as the full path writes them, the dropped ones removed (with deleteTopicWithBrokerRegistration).
    If the live info records these very bytes (`rd`, same token: another connection or worker registered them
    already), they are replayed as in unchanged mode. Otherwise the full registration of ARGV 15 is applied.
  Returns:
    {1, haServerAddr|"", masterAddr|"", hasKv 0/1, {k, v, ...}, changedTopics, registerFirst 0/1, unchanged 0/1}
      unchanged mode (and delta mode replaying) adds: brokerName, clusterName, brokerAddr of the registration it
      replayed; delta mode otherwise adds "delta" (the delta was written) or "whole" (the table of ARGV 15)
      begin mode adds: applyTopics 0/1, checkEach 0/1 (dataVersion changed, first, or an earlier one unfinished:
      every topic is written, not only missing ones), wipeWrite 0/1, brokerChanged 0/1 (the worker publishes
      the broker's topics, registerFinish, instead of this script naming them all)
    {2}                fenced by a newer stateVersion at this id: ignored (live entry of the new addr dropped);
                       begin mode: {2, brokerChanged 0/1}
    {-1, ownerCluster} BROKER_NAME_CONFLICT: the brokerName belongs to another cluster; nothing written
    {-2}               REGISTER_FAILED: single-topic guard; nothing written
    {-4, topic}        CROSS_CLUSTER_REFUSED: the topic lives only on other clusters' brokers; nothing written
    {-5, brokerAddr}   CROSS_CLUSTER_REFUSED: a live broker of another cluster holds the address; nothing written
    {3}                unchanged mode only: not provably unchanged, send the full registration; nothing written
  Side effects:
    route tables, reverse index, liveness; an address registered under a new brokerName leaves the old one;
    a replaced address at the same id loses its liveness. A broker whose queue data changed gets a new topic
    generation ({P}:tg). With a digest: the live info records it with the role and generation it was applied
    under, and {P}:rd:<digest> names the member (PX = twice the heartbeat timeout, at least 2 min); `td` =
    "digest|topic token" when the broker's queue data are now exactly its table (every topic compared: a new data
    version, a first registration, a delta that changed nothing it skips; a slave's: none to keep), else none.
    Publishes changed topics on {prefix}:changes, and "!brokerName" unless unchanged (the worker's answers to
    unchanged registrations of the broker end). Renews {P}:civer when what clusterInfo shows changed (a new
    broker, cluster or member, an address, the acting-master flag, the zone; never for the same registration).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1], brokers = KEYS[2], clusters = KEYS[3], live = KEYS[4], deadlines = KEYS[5], filters = KEYS[6], ver = KEYS[7], kvns = KEYS[8] }
local base = key_base(KEYS[1])
--- @include "includes/brokers"

local delete_missing, return_kv, guard = ARGV[11] == "1", ARGV[12] == "1", ARGV[13] == "1"
local now = now_ms(ARGV[16])
local digest, unchanged, begin, delta = ARGV[20] or "", ARGV[21] == "1", ARGV[21] == "2", ARGV[21] == "3"
local replay = false  -- delta mode: these bytes are what the broker registered last; applied as unchanged
local regid = ARGV[23] or ""
local krd = base .. "rd:" .. digest
local cluster, name, id, addr, ha, zone, eam_arg, timeout, dv, sv, filter_arg, recorded_token
if unchanged then
  -- Replay the registration recorded under this digest: the same bytes carry the same identity, data version,
  -- topic table and filter servers, so the recorded arguments are the ones a full decode would give.
  local member = rcall("GET", krd)
  if not member then return { 3 } end
  local f = rcall("HMGET", base .. "l:" .. member, "rd", "name", "id", "ha", "timeout", "dv", "sv", "zone", "eam",
    "fsl", "tk")
  if f[1] ~= digest then return { 3 } end  -- unregistered, expired, or registered other bytes since
  cluster, addr = string.match(member, "^([^|]+)|(.+)$")
  name, id, ha, timeout, dv, sv = f[2], f[3], f[4], tonumber(f[5]), f[6], tonumber(f[7])
  zone, eam_arg, filter_arg, recorded_token = f[8], f[9], f[10], f[11]
  if ARGV[22] ~= "" and not string.find("\n" .. ARGV[22], "\n" .. cluster .. "\n", 1, true) then return { 3 } end
else
  cluster, name, id, addr = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
  ha, zone, eam_arg = ARGV[5], ARGV[6], ARGV[7]
  timeout, dv, sv = tonumber(ARGV[8]), ARGV[9], tonumber(ARGV[10])
  filter_arg = ARGV[14]
end

local groups = (unchanged or begin) and "" or ARGV[15]

local kb, kba, kbt = base .. "b:" .. name, base .. "ba:" .. name, base .. "bt:" .. name
local owner = rcall("HGET", kb, "cluster")
if owner and owner ~= cluster then return { -1, owner } end

-- What the topic step (10) depends on besides the table itself: the role it is applied in (master, prime slave
-- with or without the write bit wiped, other), deleteTopicWithBrokerRegistration, and the broker's topic
-- generation, which every script that changes its queue data renews (registrations, unregister, expiry, delete
-- topic, register topic, write perm).
local function role_of(flat_addrs)
  if id == "0" then return "m" end
  local min_id = nil
  for i = 1, #flat_addrs, 2 do
    local n = tonumber(flat_addrs[i])
    if min_id == nil or n < min_id then min_id = n end
  end
  if eam_arg == "" or tonumber(id) ~= min_id then return "s" end
  return eam_arg == "1" and "P" or "p"  -- "P": its queue data are registered with the write bit cleared
end
local function topic_token(role)
  if role == "s" then return "s" end  -- step 10 does nothing for other slaves: no generation to watch
  return role .. (delete_missing and "d" or "k") .. "|" .. (rcall("HGET", base .. "tg", name) or "")
end

if unchanged then
  -- The unchanged path is taken only when the full path would change no queue data: this id still holds this
  -- address (nothing to fence or replace), and role, switch and generation are those recorded by the
  -- registration of these bytes: its topics are all in place as it left them, and no one changed one since.
  -- A cross-cluster guard that would check the payload's topics needs them for a slave (not in bt:) => full.
  if owner ~= cluster or rcall("HGET", kba, id) ~= addr then return { 3 } end
  local role = role_of(rcall("HGETALL", kba))
  if topic_token(role) ~= recorded_token then return { 3 } end
  if ARGV[18] == "1" and ARGV[19] == "*" and role == "s" then return { 3 } end
end
if delta then
  -- The delta's fence: this id still holds this address (nothing of steps 5-8 to replace or fence), and the
  -- broker's queue data are exactly the base's table, applied under the topic token in force now (role, switch,
  -- generation: any change to them since took a new generation). Else the full registration.
  delta = false
  if owner == cluster and rcall("HGET", kba, id) == addr then
    local rec = rcall("HMGET", base .. "l:" .. cluster .. "|" .. addr, "td", "rd", "tk")
    local token = topic_token(role_of(rcall("HGETALL", kba)))
    if digest ~= "" and rec[2] == digest and rec[3] == token then
      unchanged, replay = true, true  -- as unchanged mode would, with the guard's topics given
    else
      delta = rec[1] == ARGV[24] .. "|" .. token
    end
  end
end
if guard and not delta and not unchanged and single_topic(groups) and rcall("HEXISTS", kba, id) == 0 then
  return { -2 }
end
if ARGV[18] == "1" then
  if addr_held_elsewhere(K.clusters, K.live, cluster, addr) then return { -5, addr } end
  local refused = (replay or not unchanged) and topic_refused(base, cluster, name, ARGV[19])
  if refused then return { -4, refused } end
end

local ch = changes_new()
local member = cluster .. "|" .. addr
local kl = base .. "l:" .. member

-- One address serves one brokerName per cluster: leaving the old name fixes RocketMQ #1989.
local prev_name = rcall("HGET", kl, "name")
if prev_name and prev_name ~= name then remove_addr(base, K, cluster, prev_name, addr, ch) end

-- Steps 1-3: cluster membership, BrokerData, acting-master flag and zone (overwritten every time).
if rcall("SADD", K.clusters, cluster) + rcall("SADD", base .. "c:" .. cluster, name) + rcall("SADD", K.brokers, name)
    > 0 then
  cluster_info_changed(base, name)
end
local register_first = not owner
local broker_changed = register_first
if register_first then rcall("HSET", kb, "cluster", cluster) end
local eam = (eam_arg == "1") and "1" or "0"
if rcall("HGET", kb, "enableActingMaster") ~= eam then
  rcall("HSET", kb, "enableActingMaster", eam)
  broker_changed = true
end
if zone ~= "" then
  if rcall("HGET", kb, "zoneName") ~= zone then
    rcall("HSET", kb, "zoneName", zone)
    broker_changed = true
  end
elseif rcall("HDEL", kb, "zoneName") == 1 then
  broker_changed = true
end
if broker_changed then cluster_info_changed(base, name) end  -- filter servers (below) are not in the cluster info

-- Step 5: slave -> master switch, one id per address.
local flat = rcall("HGETALL", kba)
local addrs = {}
for i = 1, #flat, 2 do
  if flat[i + 1] == addr and flat[i] ~= id then
    rcall("HDEL", kba, flat[i])
    broker_changed = true
    cluster_info_changed(base, name)
  else
    addrs[flat[i]] = flat[i + 1]
  end
end

-- Step 6: epoch fencing, a newer stateVersion already holds this id.
local old = addrs[id]
if old and old ~= addr then
  local old_sv = rcall("HGET", base .. "l:" .. cluster .. "|" .. old, "sv")
  if old_sv and tonumber(old_sv) > sv then
    drop_live(base, K, cluster, addr, ch, name)
    if broker_changed and not begin then
      for _, t in ipairs(rcall("SMEMBERS", kbt)) do changes_add(ch, t) end
    elseif broker_changed then
      changes_add_broker(ch, name)  -- see the end of the script
    end
    changes_publish(base, K.ver, ch)
    if begin then return { 2, broker_changed and 1 or 0 } end
    return { 2 }
  end
end

-- Step 8: take the id; the address it replaces is no longer a member, so its liveness goes too.
if old ~= addr then
  rcall("HSET", kba, id, addr)
  addrs[id] = addr
  broker_changed = true
  cluster_info_changed(base, name)
  if old then drop_live(base, K, cluster, old, ch, name) end
end
register_first = register_first or (not old)

-- Step 9: master or prime slave (lowest id, new-style broker only).
local is_master = id == "0"
local min_id = nil
for i, _ in pairs(addrs) do
  local n = tonumber(i)
  if min_id == nil or n < min_id then min_id = n end
end
local is_prime_slave = eam_arg ~= "" and not is_master and tonumber(id) == min_id

-- Step 10: topics, from the master or the prime slave only. A chunked registration that began and did not end
-- (its worker died) leaves `rg` in the live info: the next one writes every topic, as for a new dataVersion.
local changed_topics = 0
local applies = (is_master or is_prime_slave) and not unchanged
local check_each = false
local exact = not applies  -- td: the queue data are exactly this registration's table (a slave's: none to keep)
local same_table = false  -- the store's table is exactly this very registration's already
if applies then
  local pv = rcall("HMGET", kl, "dv", "rg", "td")
  check_each = register_first or (not pv[1]) or pv[1] ~= dv or pv[2] ~= false
  same_table = not check_each and digest ~= "" and pv[3] ~= false
    and pv[3] == digest .. "|" .. topic_token(role_of(rcall("HGETALL", kba)))
end
if applies and begin then
  rcall("HSET", kb, "rg", regid)  -- this registration's chunks from now on; any earlier one's are refused
  topics_touched(base, name)  -- recorded tokens of this broker end now; registerFinish records the new one
elseif applies and delta then
  -- Against the base's table, which the fence says is stored: the topics it dropped, those whose queue data
  -- changed (served, and with the base's data, so different: no comparison), those it adds (as the full path).
  rcall("HDEL", kb, "rg")
  if delete_missing then
    for t in string.gmatch(ARGV[26], "[^\n]+") do
      drop_queue_data(base, K.topics, name, t, ch)
      changed_topics = changed_topics + 1
    end
  end
  if check_each then
    changed_topics = changed_topics + write_changed_groups(base, name, ARGV[25], is_prime_slave and eam == "1", ch)
  end
  exact = check_each or ARGV[25] == ""  -- with the same data version the full path leaves changed data too
  changed_topics = changed_topics + write_topic_groups(base, K.topics, name, ARGV[27], check_each,
    is_prime_slave and eam == "1", ch)
  if changed_topics > 0 then topics_touched(base, name) end
elseif applies then
  rcall("HDEL", kb, "rg")  -- applied whole: a chunked registration of this broker still under way is over
  exact = check_each or same_table
  if delete_missing then
    local in_payload = group_names(groups)
    for _, t in ipairs(rcall("SMEMBERS", kbt)) do
      if not in_payload[t] then
        drop_queue_data(base, K.topics, name, t, ch)
        changed_topics = changed_topics + 1
      end
    end
  end
  changed_topics = changed_topics + write_topic_groups(base, K.topics, name, groups, check_each,
    is_prime_slave and eam == "1", ch)
  if changed_topics > 0 then topics_touched(base, name) end
end

-- What a worker answered unchanged registrations of this broker with may no longer hold: tell them ("!name").
local prev = rcall("HMGET", kl, "dv", "ha", "timeout")
if not unchanged and (begin or register_first or broker_changed or changed_topics > 0 or prev[1] ~= dv
    or prev[2] ~= ha or tonumber(prev[3]) ~= timeout) then
  changes_add_state(ch, name)
end

-- Step 11: liveness, keyed by (cluster, addr), scored on the Redis clock.
rcall("ZADD", K.live, now, member)
rcall("ZADD", K.deadlines, now + timeout, member)
rcall("HSET", kl, "dv", dv, "sv", sv, "ha", ha, "timeout", timeout, "name", name, "id", id, "conn", ARGV[17] or "")
if applies and begin then
  -- Pending until registerFinish: no digest yet (an unchanged replay now would skip the unwritten topics).
  rcall("HSET", kl, "rg", regid, "rtk", topic_token(role_of(rcall("HGETALL", kba))), "zone", zone, "eam", eam_arg,
    "fsl", filter_arg)
  rcall("HDEL", kl, "rd", "tk", "td")
else
  if applies then rcall("HDEL", kl, "rg", "rtk") end  -- its topics are all written now
  if digest == "" then
    rcall("HDEL", kl, "rd", "tk", "td")  -- the bytes are unknown: the next registration must be a full one
  elseif not unchanged then
    local token = topic_token(role_of(rcall("HGETALL", kba)))
    rcall("HSET", kl, "rd", digest, "tk", token, "zone", zone, "eam", eam_arg, "fsl", filter_arg)
    if exact then rcall("HSET", kl, "td", digest .. "|" .. token) else rcall("HDEL", kl, "td") end
  end
end
-- The digest's key outlives the broker's registration interval (30 s) even for short timeouts; one left behind
-- by other bytes since is harmless: the live info's "rd" decides.
if digest ~= "" and not (applies and begin) then rcall("SET", krd, member, "PX", 2 * math.max(timeout, 60000)) end

-- Step 12: filter servers: absent leaves them, "[]" removes, a list replaces.
if filter_arg ~= "-" then
  local before = rcall("HGET", K.filters, member)
  if filter_arg == "[]" then
    if before then rcall("HDEL", K.filters, member) end
  elseif before ~= filter_arg then
    rcall("HSET", K.filters, member, filter_arg)
  end
  if (before or "[]") ~= filter_arg then broker_changed = true end
end

if broker_changed and not begin then
  -- a delta's update lines: every topic is named below, but those this registration joined (their join lines carry
  -- the broker's data as it is now)
  ch.lines = {}
  local joined = ch.joined[name] or {}
  for _, t in ipairs(rcall("SMEMBERS", kbt)) do
    if not joined[t] then changes_add(ch, t) end
  end
elseif broker_changed then
  -- A chunked registration names its topics when it ends (registerFinish), which a worker dying mid-way never
  -- reaches: every route showing the broker changes now, so workers evict those they cached ("@<brokerName>").
  changes_add_broker(ch, name)
end
changes_publish(base, K.ver, ch)

-- Step 13: a slave learns its live master's address and HA address.
local ha_out, master_out = "", ""
if id ~= "0" then
  local maddr = addrs["0"]
  if maddr and rcall("ZSCORE", K.live, cluster .. "|" .. maddr) then
    ha_out = rcall("HGET", base .. "l:" .. cluster .. "|" .. maddr, "ha") or ""
    master_out = maddr
  end
end

local has_kv, kv = 0, {}
if return_kv and rcall("SISMEMBER", K.kvns, "ORDER_TOPIC_CONFIG") == 1 then
  has_kv = 1
  kv = rcall("HGETALL", base .. "kv:ORDER_TOPIC_CONFIG")
end
if begin then
  return { 1, ha_out, master_out, has_kv, kv, 0, register_first and 1 or 0, 0, applies and 1 or 0,
    check_each and 1 or 0, (is_prime_slave and eam == "1") and 1 or 0, broker_changed and 1 or 0 }
end
if unchanged then  -- who it was: the worker may answer the same bytes again from memory (service/core/unchanged.py)
  return { 1, ha_out, master_out, has_kv, kv, 0, 0, 1, name, cluster, addr }
end
if ARGV[21] == "3" then  -- how the delta mode went: "delta" (the delta written) or "whole" (the table)
  return { 1, ha_out, master_out, has_kv, kv, changed_topics, register_first and 1 or 0, 0, delta and "delta" or "whole" }
end
return { 1, ha_out, master_out, has_kv, kv, changed_topics, register_first and 1 or 0, 0 }
