-- Removal of a broker address: shared by unregister, expiry, a closed connection and the rename path of register.
-- Costs O(that broker's topics) thanks to the reverse index "bt:<brokerName>"; past `defer` topics it costs O(1)
-- here and the rest is left to sweepBroker's bounded steps (lua/sweepBroker-3.lua, service/store/sweeps.py).

-- Queue a sweep of `broker_name`'s topics: kind "r" (remove the queue data of the topics in sw:<id>) or "n" (name
-- every topic of bt:<brokerName> in change events, clearing the write bit too when `wipe`). Returns its id.
local function sweep_new(base, kind, broker_name, wipe)
  local ks = base .. "sweeps"
  local id = tostring(rcall("HINCRBY", ks, "#", 1))
  rcall("HSET", ks, id, kind .. "\t" .. broker_name .. "\t" .. (wipe and "1" or "0") .. "\t0")
  return id
end

-- More topics than `defer` (0 or nil: never): too many to touch in this script.
local function too_many(kbt, defer)
  return defer ~= nil and defer > 0 and rcall("SCARD", kbt) > defer
end

-- Drop the liveness of (cluster, addr): live score, deadline, live info, filter servers. Filter servers show in
-- the broker's routes, so removing them changes each of its topics (or, past `defer` topics, the broker: an "@"
-- event; returns the id of a sweep that names the topics afterwards).
local function drop_live(base, K, cluster, addr, ch, broker_name, defer)
  local member = cluster .. "|" .. addr
  if broker_name then changes_add_state(ch, broker_name) end
  rcall("ZREM", K.live, member)
  rcall("ZREM", K.deadlines, member)
  rcall("DEL", base .. "l:" .. member)
  if rcall("HDEL", K.filters, member) == 1 and broker_name then
    local kbt = base .. "bt:" .. broker_name
    if too_many(kbt, defer) then
      changes_add_broker(ch, broker_name)
      return sweep_new(base, "n", broker_name, false)
    end
    for _, t in ipairs(rcall("SMEMBERS", kbt)) do changes_add(ch, t) end
  end
  return nil
end

-- Remove every id of `broker_name` whose address is `addr` (RocketMQ #5374: by address, not id).
-- Returns 0 when nothing matched, 1 when the broker is gone (with its queues, cluster membership,
-- and the cluster if emptied), 2 when it was reduced (acting-master rule: no id 0 => WRITE cleared); and the id of
-- the sweep queued when the broker has more than `defer` topics. A gone broker's reverse index is then renamed to
-- sw:<id> at once: from now on readers see none of its queue data (getRoutes shows a broker's queue data of a
-- topic only while the topic is in its bt:), and the sweep deletes the fields. A reduced one's routes change
-- through an "@" event now; the sweep names its topics (and clears their write bit) afterwards.
local function remove_addr(base, K, cluster, broker_name, addr, ch, defer)
  local kb = base .. "b:" .. broker_name
  if rcall("HGET", kb, "cluster") ~= cluster then return 0 end
  local kba = base .. "ba:" .. broker_name
  local flat = rcall("HGETALL", kba)
  local matched, remaining, has_master = false, 0, false
  for i = 1, #flat, 2 do
    if flat[i + 1] == addr then
      rcall("HDEL", kba, flat[i])
      matched = true
    else
      remaining = remaining + 1
      if flat[i] == "0" then has_master = true end
    end
  end
  if not matched then return 0 end
  cluster_info_changed(base, broker_name)
  topics_touched(base, broker_name)
  local kbt = base .. "bt:" .. broker_name
  local large = too_many(kbt, defer)
  if remaining == 0 then
    local sweep = nil
    if large then
      sweep = sweep_new(base, "r", broker_name, false)
      rcall("RENAME", kbt, base .. "sw:" .. sweep)
      changes_add_broker(ch, broker_name)
    else
      for _, t in ipairs(rcall("SMEMBERS", kbt)) do
        local kt = base .. "t:" .. t
        rcall("HDEL", kt, broker_name)
        if topic_drop_if_unserved(base, K.topics, kt, t) then changes_add(ch, t) else changes_leave(ch, broker_name, t) end
      end
    end
    rcall("DEL", kb, kba, kbt)
    -- A token names a generation only while its broker has one, so with no broker left the counter may restart.
    rcall("HDEL", base .. "tg", broker_name)
    if rcall("HLEN", base .. "tg") == 1 then rcall("DEL", base .. "tg") end
    rcall("SREM", K.brokers, broker_name)
    local kc = base .. "c:" .. cluster
    rcall("SREM", kc, broker_name)
    if rcall("EXISTS", kc) == 0 then rcall("SREM", K.clusters, cluster) end
    return 1, sweep
  end
  local wipe = (not has_master) and rcall("HGET", kb, "enableActingMaster") == "1"
  if large then
    changes_add_broker(ch, broker_name)
    return 2, sweep_new(base, "n", broker_name, wipe)
  end
  for _, t in ipairs(rcall("SMEMBERS", kbt)) do
    changes_add(ch, t)
    if wipe then wipe_write_of(base, broker_name, t) end
  end
  return 2
end
