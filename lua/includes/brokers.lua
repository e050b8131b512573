-- Removal of a broker address: shared by unregister, expiry and the rename path of register.
-- Costs O(that broker's topics) thanks to the reverse index "bt:<brokerName>".

-- Drop the liveness of (cluster, addr): live score, deadline, live info, filter servers.
local function drop_live(base, K, cluster, addr, ch, broker_name)
  local member = cluster .. "|" .. addr
  rcall("ZREM", K.live, member)
  rcall("ZREM", K.deadlines, member)
  rcall("DEL", base .. "l:" .. member)
  if rcall("HDEL", K.filters, member) == 1 and broker_name then
    for _, t in ipairs(rcall("SMEMBERS", base .. "bt:" .. broker_name)) do changes_add(ch, t) end
  end
end

-- Remove every id of `broker_name` whose address is `addr` (RocketMQ #5374: by address, not id).
-- Returns 0 when nothing matched, 1 when the broker is gone (with its queues, cluster membership,
-- and the cluster if emptied), 2 when it was reduced (acting-master rule: no id 0 => WRITE cleared).
local function remove_addr(base, K, cluster, broker_name, addr, ch)
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
  topics_touched(base, broker_name)
  local kbt = base .. "bt:" .. broker_name
  local topics = rcall("SMEMBERS", kbt)
  if remaining == 0 then
    for _, t in ipairs(topics) do
      local kt = base .. "t:" .. t
      rcall("HDEL", kt, broker_name)
      if rcall("EXISTS", kt) == 0 then rcall("SREM", K.topics, t) end
      changes_add(ch, t)
    end
    rcall("DEL", kb, kba, kbt)
    -- A token names a generation only while its broker has one, so with no broker left the counter may restart.
    rcall("HDEL", base .. "tg", broker_name)
    if rcall("HLEN", base .. "tg") == 1 then rcall("DEL", base .. "tg") end
    rcall("SREM", K.brokers, broker_name)
    local kc = base .. "c:" .. cluster
    rcall("SREM", kc, broker_name)
    if rcall("EXISTS", kc) == 0 then rcall("SREM", K.clusters, cluster) end
    return 1
  end
  local wipe = (not has_master) and rcall("HGET", kb, "enableActingMaster") == "1"
  for _, t in ipairs(topics) do
    changes_add(ch, t)
    if wipe then
      local kt = base .. "t:" .. t
      local enc = rcall("HGET", kt, broker_name)
      if enc then
        local p = qd_perm(enc)
        if is_writable(p) then rcall("HSET", kt, broker_name, qd_with_perm(enc, clear_write(p))) end
      end
    end
  end
  return 2
end
