--[[
  Alter a broker set's SyncStateSet on its master's request (RocketMQ CONTROLLER_ALTER_SYNC_STATE_SET 1001;
  ReplicasInfoManager.alterSyncStateSet and its AlterSyncStateSetEvent in one step). Fenced by both epochs the
  master based its request on, so a stale master can never change the set.

  KEYS:
    1 groups       SET    {P}:ctl:groups, every brokerName the controller knows
    2 alive        ZSET   {P}:ctl:alive, "cluster|brokerName|brokerId" -> last heartbeat + timeout ms
  ARGV:
    1 now ms ("" = Redis TIME)
    2 brokerName
    3 masterBrokerId of the request ("" = none)
    4 masterEpoch of the request
    5 syncStateSetEpoch of the request body
    6 the proposed SyncStateSet, "1,2,3"
  Returns:
    {code, extra, view...}: extra = the new SyncStateSet epoch on 0, the offending brokerId on 2003/2006.
    Codes, checked in Java's order: 2013 unknown set; 2013 set unchanged; 2002 CONTROLLER_INVALID_MASTER (no master,
    or another); 2000 CONTROLLER_FENCED_MASTER_EPOCH; 2001 CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH; 2003
    CONTROLLER_INVALID_REPLICAS (an id that is no replica); 2006 CONTROLLER_BROKER_NOT_ALIVE; 2013 the new set lacks
    the master; 0 = altered (epoch + 1)
  Side effects:
    On 0: sss := the new set, sepoch += 1. Publishes nothing.
]]
local rcall = redis.call
--- @include "controller/includes/ctl"
local K = { groups = KEYS[1], alive = KEYS[2] }
local base = ctl_base(K.groups)

local now = ctl_now(ARGV[1])
local name = ARGV[2]
local req_master, req_mepoch, req_sepoch = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local new = sss_decode(ARGV[6])
local kg, kr = base .. "ctl:g:" .. name, base .. "ctl:r:" .. name

local function answer(code, epoch)
  return prepend({ code, epoch }, group_view(base, K.alive, name, now))
end

local g = rcall("HMGET", kg, "cluster", "master", "mepoch", "sss", "sepoch")
if not g[1] then return answer(2013, 0) end
local old = sss_decode(g[4])
local same = sss_size(old) == sss_size(new)
if same then
  for id in pairs(new) do if not old[id] then same = false end end
end
if same then return answer(2013, 0) end
if g[2] == "" or req_master == "" or tonumber(g[2]) ~= tonumber(req_master) then return answer(2002, 0) end
if tonumber(g[3]) ~= req_mepoch then return answer(2000, 0) end
if tonumber(g[5]) ~= req_sepoch then return answer(2001, 0) end
local ids = {}
for id in pairs(new) do ids[#ids + 1] = id end
table.sort(ids)
for _, id in ipairs(ids) do
  if rcall("HEXISTS", kr, ctl_id(id)) == 0 then return answer(2003, id) end
  if not ctl_alive(K.alive, g[1], name, id, now) then return answer(2006, id) end
end
if not new[tonumber(g[2])] then return answer(2013, 0) end
local epoch = tonumber(g[5]) + 1
rcall("HSET", kg, "sss", sss_encode(new), "sepoch", epoch)
return answer(0, epoch)
