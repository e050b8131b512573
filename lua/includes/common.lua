-- Shared helpers: key derivation from the hash-tagged base, clock, queue-data codec, change events.
-- Every derived key starts with the base of KEYS[1] ("{prefix}:"), so all keys share one cluster slot.

local unpack = unpack or table.unpack

local function key_base(k1)
  return string.match(k1, "^(.-}:)")
end

-- Redis clock in ms unless the caller pins `now` (deterministic tests).
local function now_ms(arg)
  if arg and arg ~= "" then return tonumber(arg) end
  local t = rcall("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Microseconds of Redis time since `t0` (a TIME reply): what a step script reports of its own cost, so the worker
-- sizes the next step by it (service/store/steps.py).
local function elapsed_us(t0)
  local t = rcall("TIME")
  return (tonumber(t[1]) - tonumber(t0[1])) * 1000000 + tonumber(t[2]) - tonumber(t0[2])
end

-- QueueData as "read,write,perm,sysFlag".
local function qd_encode(r, w, p, s)
  return r .. "," .. w .. "," .. p .. "," .. s
end

local function qd_perm(enc)
  local _, _, p = string.match(enc, "^(%d+),(%d+),(%d+),(%d+)$")
  return tonumber(p)
end

local function qd_with_perm(enc, perm)
  local r, w, _, s = string.match(enc, "^(%d+),(%d+),(%d+),(%d+)$")
  return qd_encode(r, w, perm, s)
end

-- PermName.WRITE = 2; Redis' Lua has `bit`, fakeredis does not, so plain arithmetic.
local function is_writable(perm)
  return math.floor(perm / 2) % 2 == 1
end

local function clear_write(perm)
  if is_writable(perm) then return perm - 2 end
  return perm
end

-- Clear the write bit of `broker_name`'s queue data of topic `t` (RocketMQ's acting-master rule); whether it changed.
local function wipe_write_of(base, broker_name, t)
  local kt = base .. "t:" .. t
  local enc = rcall("HGET", kt, broker_name)
  if not enc then return false end
  local p = qd_perm(enc)
  if not is_writable(p) then return false end
  rcall("HSET", kt, broker_name, qd_with_perm(enc, clear_write(p)))
  return true
end

-- Change-event accumulator: topics whose routes changed; collapses to "*" past a bound.
-- A registration of a broker with 100 000 topics names them all: other topics stay cached in every worker
-- (a `*` would flush every route cache while Redis is busy with that very registration).
local MAX_EVENT_TOPICS = 200000

local function changes_new()
  return { seen = {}, n = 0, all = false, brokers = {}, states = {}, updates = {}, nu = 0, lines = {},
           leaves = {}, leave_order = {}, joins = {}, join_order = {}, joined = {} }
end

-- Topic `t`'s route changed only in `broker_name`'s queue data, now `enc` ("r,w,perm,sysFlag"): published in a line
-- "=<brokerName>\t<enc>\t<topic>..." with the other topics of that broker and queue data, with which a worker
-- updates its cached routes in place instead of reading them again (service/core/route_cache.py; it evicts what it
-- cannot update). A topic also named plainly is evicted.
local function changes_update(ch, t, broker_name, enc)
  if ch.all then return end
  if ch.updates[t] == nil then ch.nu = ch.nu + 1 end
  if ch.nu > MAX_EVENT_TOPICS then
    ch.all = true
    ch.seen = {}
    return
  end
  ch.updates[t] = broker_name .. "\t" .. enc
end

-- `n` topics ("t1\tt2...") changed only in `broker_name`'s queue data, all now `enc`: published as they are, one
-- line (a delta registration's groups). A topic also named plainly is evicted (the worker evicts after updating).
local function changes_update_group(ch, broker_name, enc, topics, n)
  if ch.all then return end
  ch.nu = ch.nu + n
  if ch.nu > MAX_EVENT_TOPICS then
    ch.all = true
    ch.seen = {}
    return
  end
  ch.lines[#ch.lines + 1] = "=" .. broker_name .. "\t" .. enc .. "\t" .. topics
end

-- Brokers whose registration state changed in this script (queue data, addresses, liveness removed, a full
-- registration): published as "!<brokerName>" lines ("!*": every broker), which routes ignore and which end the
-- worker's answers to unchanged registrations of that broker (service/core/unchanged.py). topics_touched adds to
-- it too, for every script at once.
local touched_brokers = {}

local function changes_add_state(ch, broker_name)
  ch.states[broker_name] = true
end

-- Every route that shows `broker_name` changed: a line "@<brokerName>" (topic names cannot hold "@"). Workers evict
-- the cached routes that name the broker. Used where naming its topics would cost O(its topics) in one script (a
-- broker past the sweep bound, lua/sweepBroker-3.lua): the sweep's steps name the topics afterwards.
local function changes_add_broker(ch, broker_name)
  ch.brokers[#ch.brokers + 1] = broker_name
end

local function changes_add(ch, topic)
  if ch.all or ch.seen[topic] then return end
  ch.n = ch.n + 1
  if ch.n > MAX_EVENT_TOPICS then
    ch.all = true
    ch.seen = {}
    return
  end
  ch.seen[topic] = true
end

-- An ORDER_TOPIC_CONFIG key names a route only if it is a topic name (TopicValidator: `[%|a-zA-Z0-9_-]`, at most
-- 127): only such keys are published as topics. KV keys are any text, and one like "=x", "@b" or "*" would read as
-- another kind of event line.
local function is_topic_name(s)
  return #s <= 127 and string.find(s, "^[%%|a-zA-Z0-9_%-]+$") ~= nil
end

local function changes_add_all(ch)
  ch.all = true
  ch.seen = {}
end

-- Append `value` to `key`'s list in `lists`; a key's first value also appends the key to `order`, so the groups can
-- be walked in the order their keys were first seen.
local function group_add(lists, order, key, value)
  local list = lists[key]
  if list == nil then
    list = {}
    lists[key] = list
    order[#order + 1] = key
  end
  list[#list + 1] = value
end

-- Count `n` more in-place lines' topics (updates, joins, leaves); past the bound the event becomes "*".
local function changes_count_updates(ch, n)
  ch.nu = ch.nu + n
  if ch.nu > MAX_EVENT_TOPICS then
    ch.all = true
    ch.seen = {}
    return false
  end
  return true
end

-- Topic `t`, which still exists, no longer shows `broker_name` at all (the broker is gone: its queue data and its
-- BrokerData leave the route): published as "~<brokerName>\t<t1>\t<t2>...", with which a worker takes the broker
-- out of its cached routes instead of reading them again (a rolling restart of a cluster's brokers evicted every
-- route of the cluster twice, on every worker, and its readers all missed at once).
local function changes_leave(ch, broker_name, t)
  if ch.all or not changes_count_updates(ch, 1) then return end
  group_add(ch.leaves, ch.leave_order, broker_name, t)
end

-- Topic `t`, which existed before, is now served by `broker_name` too, with queue data `enc`: published as
-- "+<brokerName>\t<enc>\t<cluster>\t<enableActingMaster>\t<zone>\t<id,addr,...>\t<t1>..." with the broker's
-- data as the script leaves it (changes_publish reads it), so a worker adds the broker to its cached routes.
local function changes_join(ch, broker_name, t, enc)
  if ch.all or not changes_count_updates(ch, 1) then return end
  group_add(ch.joins, ch.join_order, broker_name .. "\t" .. enc, t)
  local joined = ch.joined[broker_name]
  if joined == nil then
    joined = {}
    ch.joined[broker_name] = joined
  end
  joined[t] = true
end

-- A broker as getRoutes sends it: "brokerName\tcluster\tenableActingMaster\tzoneName\tid,addr,id,addr..." (names
-- and addresses hold neither tab nor comma: validated), or nil when it does not exist; and its data and addresses.
local function broker_line(base, b)
  local meta = rcall("HMGET", base .. "b:" .. b, "cluster", "enableActingMaster", "zoneName")
  if not meta[1] then return nil, meta, nil end
  local aflat = rcall("HGETALL", base .. "ba:" .. b)
  return table.concat({ b, meta[1], meta[2] or "0", meta[3] or "", table.concat(aflat, ",") }, "\t"), meta, aflat
end

-- The fields of a join line for `broker_name` as getRoutes would show it now (its line without the name:
-- "cluster\team\tzone\tid,addr,..."), or nil when a worker could not build its BrokerData from them alone: the
-- broker gone, shown with an acting master (enableActingMaster without id 0: getRoutes rewrites its ids per topic),
-- any filter server registered (routes carry them by address), or a field holding a separator. Its topics are then
-- evicted instead.
local function join_fields(base, broker_name)
  local line, meta, aflat = broker_line(base, broker_name)
  if not line or rcall("HLEN", base .. "filtersrv") > 0 then return nil end
  local zero = false
  for i = 1, #aflat, 2 do
    if aflat[i] == "0" then zero = true end
  end
  if #aflat == 0 or (meta[2] == "1" and not zero) then return nil end
  if string.find(meta[1] .. (meta[3] or ""), "[\t\n,]") or string.find(table.concat(aflat, ""), "[\t\n,]") then
    return nil
  end
  return string.sub(line, #broker_name + 2)
end

local broker_lines_flush  -- below, with the cluster info version it follows

-- Bump the registry version and publish "<ver>\t2\n*" or "<ver>\t2\n<t1>\n<t2>...\n=<broker>\t<enc>\t<t3>\t<t4>...
-- \n@<broker>...\n!<broker>..." (format 2: in-place updates grouped by broker and queue data, so that a worker
-- checks them against its cache in one pass; service/store/events.py reads it); format 3 when it holds a broker's
-- leaves ("~") or joins ("+"), which a worker of a release before them must not read as topics (it flushes on a
-- format it does not know).
local function changes_publish(base, k_ver, ch)
  broker_lines_flush(base)
  for b, _ in pairs(touched_brokers) do ch.states[b] = true end
  touched_brokers = {}
  if not ch.all and ch.n == 0 and ch.nu == 0 and #ch.brokers == 0 and #ch.lines == 0 and next(ch.states) == nil then
    return 0
  end
  local ver = rcall("INCR", k_ver)
  local payload
  if ch.all then
    payload = ver .. "\t2\n*"
  else
    local parts = { ver .. "\t2" }
    for t, _ in pairs(ch.seen) do parts[#parts + 1] = t end
    local groups, order = {}, {}
    for t, u in pairs(ch.updates) do
      if not ch.seen[t] then group_add(groups, order, u, t) end
    end
    for _, u in ipairs(order) do parts[#parts + 1] = "=" .. u .. "\t" .. table.concat(groups[u], "\t") end
    for _, line in ipairs(ch.lines) do parts[#parts + 1] = line end
    local fmt = "2"
    for _, b in ipairs(ch.leave_order) do
      local ts = {}
      for _, t in ipairs(ch.leaves[b]) do
        if not ch.seen[t] then ts[#ts + 1] = t end
      end
      if #ts > 0 then
        parts[#parts + 1] = "~" .. b .. "\t" .. table.concat(ts, "\t")
        fmt = "3"
      end
    end
    local fields = {}
    for _, key in ipairs(ch.join_order) do
      local b = string.match(key, "^([^\t]*)\t")
      local f = fields[b]
      if f == nil then
        f = join_fields(base, b) or false
        fields[b] = f
      end
      local ts = {}
      for _, t in ipairs(ch.joins[key]) do
        if not ch.seen[t] then
          if f then ts[#ts + 1] = t else parts[#parts + 1] = t end
        end
      end
      if #ts > 0 then
        local enc = string.sub(key, #b + 2)
        parts[#parts + 1] = "+" .. b .. "\t" .. enc .. "\t" .. f .. "\t" .. table.concat(ts, "\t")
        fmt = "3"
      end
    end
    parts[1] = ver .. "\t" .. fmt
    for _, b in ipairs(ch.brokers) do parts[#parts + 1] = "@" .. b end
    for b, _ in pairs(ch.states) do parts[#parts + 1] = "!" .. b end
    payload = table.concat(parts, "\n")
  end
  rcall("PUBLISH", base .. "changes", payload)
  return ch.n
end

-- A broker's queue data changed (any topic of it: added, removed, perm or queue counts): give the broker a new
-- generation from one registry-wide counter, so a value is never reused, not even after the broker is removed
-- and registered again. registerBroker's unchanged path is valid only while the generation it recorded holds.
local function topics_touched(base, broker_name)
  touched_brokers[broker_name] = true
  local ktg = base .. "tg"
  rcall("HSET", ktg, broker_name, rcall("HINCRBY", ktg, "#", 1))
end

-- Something GET_BROKER_CLUSTER_INFO shows changed (a broker's addresses, its name or cluster, its acting-master flag
-- or zone): renew {P}:civer, against which workers keep their copy of the cluster info (service/core/cluster_infos.py;
-- clusterInfo returns it with the tables). Once per script, and only from writes that changed something: a fleet
-- re-registering the same every 30 s leaves it alone. The new value is above the old one and above Redis TIME in
-- µs, so a value never comes back with other tables: not after a flush, nor a restart from an older save.
local function renew_version(k)
  local t = rcall("TIME")
  local old = rcall("GET", k)
  local v = string.format("%.0f", math.max(tonumber(old or "0") + 1, tonumber(t[1]) * 1000000 + tonumber(t[2])))
  rcall("SET", k, v)
  return old or "", v
end

-- How long {P}:cilog keeps a change (µs of civer, which follows Redis TIME): a stepped read older than that
-- cannot catch up (clusterInfoStep-1) and starts over.
local CILOG_KEEP_US = 600000000
local cluster_info_renewed = false
local civer_before, civer_now = "", ""
local lines_chain = ""  -- the civer {P}:bl must be at for this script's lines to continue it (broker_lines_flush)
local lines_changed = {}  -- brokers whose line this script changed

-- What GET_BROKER_CLUSTER_INFO shows of `broker_name` changed (nil: of no broker in particular). Renews civer once
-- per script and logs the broker in {P}:cilog ("<civer before>\t<civer after>\t<brokerName>", scored by the civer
-- after), with which a stepped read disturbed by changes re-reads only the brokers that changed: the entries
-- chain from one civer to the next, so a renewal that logged nothing (a worker of a release before the log)
-- breaks the chain and the read starts over instead. The broker's line in {P}:bl is rewritten when the script
-- publishes (broker_lines_flush), after all its writes.
local function cluster_info_changed(base, broker_name)
  local klog = base .. "cilog"
  if not cluster_info_renewed then
    cluster_info_renewed = true
    civer_before, civer_now = renew_version(base .. "civer")
    lines_chain = civer_before
    rcall("ZREMRANGEBYSCORE", klog, "-inf", string.format("(%.0f", tonumber(civer_now) - CILOG_KEEP_US))
  end
  rcall("ZADD", klog, civer_now, civer_before .. "\t" .. civer_now .. "\t" .. (broker_name or ""))
  if broker_name then lines_changed[broker_name] = true end
end

-- {P}:bl holds brokers' lines (broker_line), one HMGET for all the brokers of a route read (getRoutes looked up
-- two keys per broker: at 500 brokers a route, a millisecond of Redis a call, for every cache miss of every
-- worker), and "#": the civer they are current at. Only while "#" is the registry's civer does getRoutes trust
-- it (a script of a release without lines renewing civer leaves "#" behind); a script that finds "#" not where
-- its renewal started (such a script ran between) empties it first, so a line present is always current and a
-- broker without one is looked up. Called by changes_publish, after the script's writes.
broker_lines_flush = function(base)
  if not cluster_info_renewed then return end
  local kbl = base .. "bl"
  if rcall("HGET", kbl, "#") ~= lines_chain then rcall("DEL", kbl) end
  for b, _ in pairs(lines_changed) do
    local line = broker_line(base, b)
    if line then rcall("HSET", kbl, b, line) else rcall("HDEL", kbl, b) end
  end
  rcall("HSET", kbl, "#", civer_now)
  lines_chain = civer_now
  lines_changed = {}
end

-- The set of all topics ({P}:topics, GET_ALL_TOPIC_LIST_FROM_NAMESERVER) changed: renew {P}:tlver as civer is
-- renewed, against which workers keep their copy of the all-topics list (service/core/topic_lists.py; topicList
-- returns it with every page of mode "all"). Once per script, and only when a topic came or went: queue data
-- changes of served topics, and a fleet re-registering the same, leave it alone.
local topic_list_renewed = false
local function topic_list_changed(base)
  if topic_list_renewed then return end
  topic_list_renewed = true
  renew_version(base .. "tlver")
end

-- Every write of {P}:topics goes through these two and topics_joined, so tlver moves exactly when the set does.
-- Whether `t` is new.
local function topic_add(base, k_topics, t)
  if rcall("SADD", k_topics, t) == 1 then
    topic_list_changed(base)
    return true
  end
  return false
end
-- Topic `t` (its queue data at `kt`) leaves the set if no broker's queue data remain; whether none remain.
local function topic_drop_if_unserved(base, k_topics, kt, t)
  if rcall("EXISTS", kt) ~= 0 then return false end
  if rcall("SREM", k_topics, t) == 1 then topic_list_changed(base) end
  return true
end

-- One broker's row of GET_BROKER_CLUSTER_INFO's brokerAddrTable: {brokerName, cluster, enableActingMaster,
-- zoneName|"", {id, addr, ...}} (clusterInfo-2 reads every broker's, clusterInfoStep-1 a chunk's a call).
local function cluster_info_row(base, bname)
  local meta = rcall("HMGET", base .. "b:" .. bname, "cluster", "enableActingMaster", "zoneName")
  return { bname, meta[1] or "", meta[2] or "0", meta[3] or "", rcall("HGETALL", base .. "ba:" .. bname) }
end

-- {P}:civer as the cluster info tables reflect it now ("" on an empty registry that never had one). A registry
-- written before the counter existed (by an earlier release) has brokers and no civer: it is started here, or no
-- worker could keep a copy until a broker changed.
local function cluster_info_version(base, k_brokers)
  local v = rcall("GET", base .. "civer")
  if v then return v end
  if rcall("SCARD", k_brokers) == 0 then return "" end
  cluster_info_changed(base, nil)
  return rcall("GET", base .. "civer")
end

-- Whether `broker_name`'s queue data of topic `t` counts: the topic is in its reverse index. A field of t:<topic>
-- outside it is a leftover of a removal still being swept (sweepBroker-3): no reader may see it.
local function serves(base, broker_name, t)
  return rcall("SISMEMBER", base .. "bt:" .. broker_name, t) == 1
end

-- The cross-cluster guard's topic rule: the first of `topics` ("name\n" repeated) that `broker_name` does not serve
-- yet and whose queues live only on other clusters' brokers, or nil.
local function topic_refused(base, cluster, broker_name, topics)
  local kbt = base .. "bt:" .. broker_name
  for t in string.gmatch(topics, "[^\n]+") do
    if rcall("SISMEMBER", kbt, t) == 0 then  -- a topic this broker already serves was allowed before
      local ours, held = false, false
      for _, b in ipairs(rcall("HKEYS", base .. "t:" .. t)) do
        if serves(base, b, t) then
          held = true
          if rcall("HGET", base .. "b:" .. b, "cluster") == cluster then
            ours = true
            break
          end
        end
      end
      ours = ours or not held
      if not ours then return t end
    end
  end
  return nil
end

-- The cross-cluster guard's address rule: a live broker of another cluster holds `addr`.
local function addr_held_elsewhere(k_clusters, k_live, cluster, addr)
  for _, c in ipairs(rcall("SMEMBERS", k_clusters)) do
    if c ~= cluster and rcall("ZSCORE", k_live, c .. "|" .. addr) then return true end
  end
  return false
end

-- A registration's topic lines, "name\tread,write,perm,sysFlag\n" repeated: names in order, their queue data
-- (encoded as stored) and the set of names. One capture per line, no table per topic: this parse was a fifth of a
-- changed registration's Lua time when it took five captures and built a table per topic.
local function parse_topic_lines(lines)
  local names, encs, named = {}, {}, {}
  local n = 0
  for t, e in string.gmatch(lines, "([^\t\n]+)\t(%d+,%d+,%d+,%d+)\n") do
    n = n + 1
    names[n] = t
    encs[n] = e
    named[t] = true
  end
  return names, encs, named
end

-- The broker now serves `names[1..n]` (their t:<topic> fields written): the topics new to the registry join
-- {P}:topics (tlver renewed, as topic_add does) and the event as new; the others as the broker joining them
-- (enc_of(i): the queue data of names[i]); all join the broker's reverse index. A few commands for the batch,
-- not two per topic (500 brokers joining 200 topics each, the script alone: 463 -> 365 µs per broker).
local function topics_joined(base, k_topics, kbt, broker_name, names, n, enc_of, ch)
  if n == 0 then return end
  local fresh, nf = {}, 0
  for i = 1, n, 4000 do
    local last = math.min(i + 3999, n)
    local known = rcall("SMISMEMBER", k_topics, unpack(names, i, last))
    for j = 1, #known do
      local k = i + j - 1
      if known[j] == 1 then
        changes_join(ch, broker_name, names[k], enc_of(k))
      else
        nf = nf + 1
        fresh[nf] = names[k]
        changes_add(ch, names[k])
      end
    end
  end
  for i = 1, nf, 4000 do
    rcall("SADD", k_topics, unpack(fresh, i, math.min(i + 3999, nf)))
  end
  if nf > 0 then topic_list_changed(base) end
  for i = 1, n, 4000 do
    rcall("SADD", kbt, unpack(names, i, math.min(i + 3999, n)))
  end
end

-- Step 10 of a registration for these topics (all of a whole one's, or one chunk's): write the broker's queue data
-- of every topic whose data differ (check_each: a new data version, a first or unfinished registration) or, with
-- the same data version, of those missing for the broker only. Which it serves is asked of the reverse index
-- (SMISMEMBER in parts): a field of t:<topic> for a topic not in bt:<brokerName> is a leftover of a removal still
-- being swept (sweepBroker), invisible to readers, so it counts as missing and is written over. Returns how many
-- changed.
local function write_queue_datas(base, k_topics, broker_name, names, encs, check_each, wipe_write, ch)
  local kbt = base .. "bt:" .. broker_name
  local known = {}
  for i = 1, #names, 4000 do
    local part = { unpack(names, i, math.min(i + 3999, #names)) }
    local res = rcall("SMISMEMBER", kbt, unpack(part))
    for j = 1, #part do known[part[j]] = res[j] == 1 end
  end
  local changed = 0
  local joined, jencs, nj = {}, {}, 0
  for j, t in ipairs(names) do
    local served = known[t]
    if check_each or not served then
      local enc = encs[j]
      if wipe_write then enc = qd_with_perm(enc, clear_write(qd_perm(enc))) end
      local kt = base .. "t:" .. t
      if not served or rcall("HGET", kt, broker_name) ~= enc then
        rcall("HSET", kt, broker_name, enc)
        if not served then
          nj = nj + 1
          joined[nj] = t
          jencs[nj] = enc
        else
          changes_update(ch, t, broker_name, enc)
        end
        changed = changed + 1
      end
    end
  end
  topics_joined(base, k_topics, kbt, broker_name, joined, nj, function(i) return jencs[i] end, ch)
  return changed
end

-- A whole registration's topics, grouped by queue data ("enc\tname\tname...\n" repeated: registerBroker ARGV 15).
-- Whether they are exactly one topic (the single-topic guard), and the set of their names.
local function single_topic(groups)
  return string.find(groups, "^[^\t\n]+\t[^\t\n]+\n$") ~= nil
end

local function group_names(groups)
  local named = {}
  for _, topics in string.gmatch(groups, "([^\t\n]+)\t([^\n]+)\n") do
    for t in string.gmatch(topics, "[^\t]+") do named[t] = true end
  end
  return named
end

-- write_queue_datas for topics grouped by queue data: what a group changes in served topics is published as one
-- update line (the group's own text when every topic of it changed). Returns how many changed.
local function write_topic_groups(base, k_topics, broker_name, groups, check_each, wipe_write, ch)
  local kbt = base .. "bt:" .. broker_name
  local changed = 0
  for enc, topics in string.gmatch(groups, "([^\t\n]+)\t([^\n]+)\n") do
    local names, n = {}, 0
    for t in string.gmatch(topics, "[^\t]+") do
      n = n + 1
      names[n] = t
    end
    local served = {}
    for i = 1, n, 4000 do
      local res = rcall("SMISMEMBER", kbt, unpack(names, i, math.min(i + 3999, n)))
      for j = 1, #res do served[i + j - 1] = res[j] == 1 end
    end
    local e = enc
    if wipe_write then e = qd_with_perm(enc, clear_write(qd_perm(enc))) end
    local updated, nu = {}, 0
    local joined, nj = {}, 0
    for j = 1, n do
      local t = names[j]
      if check_each or not served[j] then
        local kt = base .. "t:" .. t
        if not served[j] or rcall("HGET", kt, broker_name) ~= e then
          rcall("HSET", kt, broker_name, e)
          if served[j] then
            nu = nu + 1
            updated[nu] = t
          else
            nj = nj + 1
            joined[nj] = t
          end
          changed = changed + 1
        end
      end
    end
    topics_joined(base, k_topics, kbt, broker_name, joined, nj, function() return e end, ch)
    if nu == n and n > 0 then
      changes_update_group(ch, broker_name, e, topics, n)
    elseif nu > 0 then
      changes_update_group(ch, broker_name, e, table.concat(updated, "\t"), nu)
    end
  end
  return changed
end

-- Step 10 of a delta registration for the topics whose queue data it changes, "enc\tname\tname...\n" per new
-- queue data: each is served with the data of the delta's base (its fence says so), which differ, so each is written
-- and named in one update line per group without reading it first; with the write bit wiped (a prime slave under
-- the acting-master rule) two data may wipe to the same, so each is compared then. Returns how many changed.
local function write_changed_groups(base, broker_name, groups, wipe_write, ch)
  local changed = 0
  for enc, topics in string.gmatch(groups, "([^\t\n]+)\t([^\n]+)\n") do
    if wipe_write then
      local e = qd_with_perm(enc, clear_write(qd_perm(enc)))
      for t in string.gmatch(topics, "[^\t]+") do
        local kt = base .. "t:" .. t
        if rcall("HGET", kt, broker_name) ~= e then
          rcall("HSET", kt, broker_name, e)
          changes_update(ch, t, broker_name, e)
          changed = changed + 1
        end
      end
    else
      local n = 0
      for t in string.gmatch(topics, "[^\t]+") do
        rcall("HSET", base .. "t:" .. t, broker_name, enc)
        n = n + 1
      end
      changes_update_group(ch, broker_name, enc, topics, n)
      changed = changed + n
    end
  end
  return changed
end

-- The broker no longer serves topic `t` (deleteTopicWithBrokerRegistration): its queue data, and the topic too
-- if no other broker serves it.
local function drop_queue_data(base, k_topics, broker_name, t, ch)
  local kt = base .. "t:" .. t
  rcall("HDEL", kt, broker_name)
  topic_drop_if_unserved(base, k_topics, kt, t)
  rcall("SREM", base .. "bt:" .. broker_name, t)
  changes_add(ch, t)
end
