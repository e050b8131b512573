--[[
  The end of a chunked registration (registerBroker mode 2, then registerChunk): after every chunk is in, a
  bounded walk of the broker's topics (SSCAN of its reverse index, `count` at a time, one call per step) removes
  those the registration did not name (deleteTopicWithBrokerRegistration) and names them all in change events
  when the broker's data changed (a new address, zone, filter servers...); the last step records the registration.
  Without a registration id it only publishes (a slave's or a fenced registration of a broker with many topics).

  KEYS:
    1 topics       SET    {P}:topics, all topic names
    2 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 brokerName   2 member "cluster|brokerAddr"   3 registration id ("" = publish only, no fence, no record)
    4 SSCAN cursor ("0" to start)   5 SSCAN count
    6 delete "1": remove the broker's topics not staged in {P}:rs:<id> by registerChunk
    7 publish "1": name every topic of the broker in the change event
    8 digest of the registration ("" = none)
    9 walk "1": walk the topics (delete or publish); "0": record only
  Returns: (walked: the topics this step looked at; elapsed: its Redis time in µs)
    {1, nextCursor, changedTopics, walked, elapsed}  walk on: call again with the cursor
    {2, changedTopics, walked, elapsed}              done (recorded, when an id was given)
    {0}                             fenced: another registration of this broker began or ended since, or the
                                    address left it; nothing written but the removal of its own staged names
  Side effects:
    with an id, at the end: the live info's pending mark goes; the digest is recorded (as a full registration
    records it) only if no other change touched the broker's queue data since the registration began.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1], ver = KEYS[2] }
local base = key_base(KEYS[1])

local started = rcall("TIME")
local name, member, regid = ARGV[1], ARGV[2], ARGV[3]
local delete, publish, digest, walk = ARGV[6] == "1", ARGV[7] == "1", ARGV[8], ARGV[9] == "1"
local kb, kl, kbt = base .. "b:" .. name, base .. "l:" .. member, base .. "bt:" .. name
if regid ~= "" and (rcall("HGET", kb, "rg") ~= regid or rcall("HGET", kl, "rg") ~= regid) then
  rcall("UNLINK", base .. "rs:" .. regid)  -- its own staged names, if any, are of no use now
  return { 0 }
end

local changed, walked = 0, 0
if walk then
  local krs = base .. "rs:" .. regid
  local ch = changes_new()
  local res = rcall("SSCAN", kbt, ARGV[4], "COUNT", tonumber(ARGV[5]))
  walked = #res[2]
  for _, t in ipairs(res[2]) do
    if delete and regid ~= "" and rcall("SISMEMBER", krs, t) == 0 then
      drop_queue_data(base, K.topics, name, t, ch)
      changed = changed + 1
    elseif publish then
      changes_add(ch, t)
    end
  end
  changes_publish(base, K.ver, ch)
  if res[1] ~= "0" then return { 1, res[1], changed, walked, elapsed_us(started) } end
end
if regid == "" then return { 2, changed, walked, elapsed_us(started) } end

rcall("UNLINK", base .. "rs:" .. regid)  -- freed in the background: it may hold 100 000 names
rcall("HDEL", kb, "rg")
local f = rcall("HMGET", kl, "rtk", "timeout")
rcall("HDEL", kl, "rg", "rtk")
-- The token names the generation taken when the registration began; another has been taken since only if some
-- other change reached the broker's queue data mid-way: then the next registration is a full one.
local generation = string.match(f[1] or "", "|(.*)$")
if digest ~= "" and generation and generation == (rcall("HGET", base .. "tg", name) or "") then
  rcall("HSET", kl, "rd", digest, "tk", f[1])
  rcall("SET", base .. "rd:" .. digest, member, "PX", 2 * math.max(tonumber(f[2]) or 0, 60000))
end
return { 2, changed, walked, elapsed_us(started) }
