-- Controller helpers: key derivation, clock, liveness, SyncStateSet codec, the group view every script returns.
-- Keys (all under the registry's hash tag, so one Redis Cluster slot; schema in docs/controller-protocol.md §8):
--   base .. "ctl:g:" .. name    HASH  cluster, next (nextAssignBrokerId), master ("" = none), mepoch, sss, sepoch
--   base .. "ctl:r:" .. name    HASH  brokerId -> address
--   base .. "ctl:k:" .. name    HASH  brokerId -> registerCheckCode
--   base .. "ctl:h:" .. member  HASH  heartbeat data of member "cluster|name|id": addr, epoch, off, conf, prio, timeout
-- Own copies of key_base/now_ms (includes/common is the route scripts'), so the controller is self-contained.

local function ctl_base(k1)
  return string.match(k1, "^(.-}:)")
end

local function ctl_now(arg)
  if arg and arg ~= "" then return tonumber(arg) end
  local t = rcall("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function ctl_id(id)
  return string.format("%d", tonumber(id))
end

local function ctl_member(cluster, name, id)
  return cluster .. "|" .. name .. "|" .. ctl_id(id)
end

-- alive iff last heartbeat + its timeout >= now (DefaultBrokerHeartbeatManager.isBrokerActive)
local function ctl_alive(alive_key, cluster, name, id, now)
  local d = rcall("ZSCORE", alive_key, ctl_member(cluster, name, id))
  return d ~= false and d ~= nil and tonumber(d) >= now
end

-- End member's liveness (its alive entry and heartbeat hash); when it was its set's current master, append
-- (name, masterEpoch) to `elect`, once per set (`seen`): the election to base on that epoch
-- (ControllerManager.onBrokerInactive). Used by heartbeat expiry and by a closed connection.
local function end_liveness(base, alive_key, member, elect, seen)
  rcall("ZREM", alive_key, member)
  rcall("DEL", base .. "ctl:h:" .. member)
  local name, id = string.match(member, "^[^|]*|(.*)|([^|]*)$")
  if name and not seen[name] then
    local g = rcall("HMGET", base .. "ctl:g:" .. name, "master", "mepoch")
    if g[1] and g[1] ~= "" and tonumber(g[1]) == tonumber(id) then
      seen[name] = true
      elect[#elect + 1] = name
      elect[#elect + 1] = tonumber(g[2])
    end
  end
end

-- SyncStateSet as "1,2,3" (ascending ids), "" when empty
local function sss_decode(s)
  local set = {}
  if s and s ~= "" then
    for id in string.gmatch(s, "[^,]+") do set[tonumber(id)] = true end
  end
  return set
end

local function sss_encode(set)
  local ids = {}
  for id, yes in pairs(set) do if yes then ids[#ids + 1] = id end end
  table.sort(ids)
  for i, id in ipairs(ids) do ids[i] = ctl_id(id) end
  return table.concat(ids, ",")
end

local function sss_size(set)
  local n = 0
  for _, yes in pairs(set) do if yes then n = n + 1 end end
  return n
end

-- replica ids of a group, ascending
local function replica_ids(kr)
  local ids = {}
  for _, id in ipairs(rcall("HKEYS", kr)) do ids[#ids + 1] = tonumber(id) end
  table.sort(ids)
  return ids
end

-- The group view: {exists, cluster, next, master, mepoch, sepoch, sss, n, id, addr, alive, ...} (ids ascending);
-- {0} when the group is unknown. Alive flags use the group's own cluster, as every Java rule but two does.
local function group_view(base, alive_key, name, now)
  local kg = base .. "ctl:g:" .. name
  local g = rcall("HMGET", kg, "cluster", "next", "master", "mepoch", "sss", "sepoch")
  if not g[1] then return { 0 } end
  local kr = base .. "ctl:r:" .. name
  local ids = replica_ids(kr)
  local out = { 1, g[1], tonumber(g[2]), g[3], tonumber(g[4]), tonumber(g[6]), g[5], #ids }
  for _, id in ipairs(ids) do
    out[#out + 1] = id
    out[#out + 1] = rcall("HGET", kr, ctl_id(id))
    out[#out + 1] = ctl_alive(alive_key, g[1], name, id, now) and 1 or 0
  end
  return out
end

local function prepend(head, tail)
  for _, v in ipairs(tail) do head[#head + 1] = v end
  return head
end
