--[[
  Elect a broker set's master (RocketMQ CONTROLLER_ELECT_MASTER 1002; ReplicasInfoManager.electMaster with
  DefaultElectPolicy, and its ElectMasterEvent, in one step). Redis runs it atomically, so two workers electing at
  once are serialised: the second sees the first's master. A worker electing because it saw the master expire
  passes the master epoch it saw, and the election happens only if nobody moved the set since.

  KEYS:
    1 groups       SET    {P}:ctl:groups, every brokerName the controller knows
    2 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2 brokerName
    3 brokerId of the request (-1 = triggered by the controller itself, as Java's ofControllerTrigger)
    4 designateElect 1/0 (mqadmin electMaster: prefer this brokerId)
    5 enableElectUncleanMaster 1/0 (fall back to every replica when no SyncStateSet member can be master)
    6 based-on master epoch ("" = none; else the call changes nothing unless the set's master epoch is still this)
  Returns:
    {code, 0, view...}: 0 = a new master (mepoch + 1, sss = {it}, sepoch + 1); 2011 CONTROLLER_MASTER_STILL_EXIST
    (the policy kept the current master; no change); 2004 CONTROLLER_MASTER_NOT_AVAILABLE (controller-triggered and
    nobody electable: master cleared, mepoch + 1); 2012 CONTROLLER_ELECT_MASTER_FAILED (broker/admin-triggered,
    nobody electable; no change); 2010 CONTROLLER_BROKER_NEED_TO_BE_REGISTERED (unknown set); -1 = the set's master
    epoch is no longer the based-on one (no change)
  Side effects:
    As above. The view's alive flags tell the caller which replicas to notify (notifyBrokerRoleChanged). Publishes
    nothing.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { groups = KEYS[1], alive = KEYS[2] }
local base = ctl_base(K.groups)

local now = ctl_now(ARGV[1])
local name = ARGV[2]
local broker_id = tonumber(ARGV[3])
local designate, unclean, based_on = ARGV[4] == "1", ARGV[5] == "1", ARGV[6]
local kg, kr = base .. "ctl:g:" .. name, base .. "ctl:r:" .. name

local function answer(code)
  return prepend({ code, 0 }, group_view(base, K.alive, name, now))
end

local g = rcall("HMGET", kg, "cluster", "master", "mepoch", "sss", "sepoch")
if not g[1] then return answer(2010) end
local cluster, mepoch, sepoch = g[1], tonumber(g[3]), tonumber(g[5])
if based_on ~= nil and based_on ~= "" and tonumber(based_on) ~= mepoch then return answer(-1) end
local old_master = nil
if g[2] ~= "" then old_master = tonumber(g[2]) end

-- (epoch desc, maxOffset desc, electionPriority asc), ties to the lowest id (Java's TreeSet over a HashSet of ids)
local function better(a, b)
  if a.epoch ~= b.epoch then return a.epoch > b.epoch end
  if a.off ~= b.off then return a.off > b.off end
  if a.prio ~= b.prio then return a.prio < b.prio end
  return a.id < b.id
end

local function try_elect(ids, prefer)
  local alive, is_alive = {}, {}
  for _, id in ipairs(ids) do
    if ctl_alive(K.alive, cluster, name, id, now) then
      alive[#alive + 1] = id
      is_alive[id] = true
    end
  end
  if #alive == 0 then return nil end
  if old_master ~= nil and is_alive[old_master] and (prefer == nil or prefer == old_master) then
    return old_master
  end
  if prefer ~= nil then
    if is_alive[prefer] then return prefer end
    return nil
  end
  local best = nil
  for _, id in ipairs(alive) do
    local h = rcall("HMGET", base .. "ctl:h:" .. ctl_member(cluster, name, id), "epoch", "off", "prio")
    local c = { id = id, epoch = tonumber(h[1] or -1), off = tonumber(h[2] or -1), prio = tonumber(h[3] or 2147483647) }
    if best == nil or better(c, best) then best = c end
  end
  return best.id
end

local new_master = nil
if mepoch == 0 and broker_id ~= -1 then
  new_master = broker_id  -- first election ever: the requester, unchecked (ReplicasInfoManager does the same)
else
  local prefer = nil
  if designate then prefer = broker_id end
  local sss = {}
  for id in pairs(sss_decode(g[4])) do sss[#sss + 1] = id end
  table.sort(sss)
  new_master = try_elect(sss, prefer)
  if new_master == nil and unclean then
    new_master = try_elect(replica_ids(kr), prefer)
  end
end

if new_master ~= nil and new_master == old_master then return answer(2011) end
if new_master ~= nil then
  rcall("HSET", kg, "master", ctl_id(new_master), "mepoch", mepoch + 1, "sss", ctl_id(new_master), "sepoch", sepoch + 1)
  return answer(0)
end
if broker_id == -1 then
  rcall("HSET", kg, "master", "", "mepoch", mepoch + 1)
  return answer(2004)
end
return answer(2012)
