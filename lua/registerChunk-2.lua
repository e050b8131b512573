--[[
  One bounded chunk of a chunked registration's topics (registerBroker mode 2 began it; registerFinish ends it):
  step 10 of registerBroker for these topics only, so no call holds Redis for long however many topics a broker has.

  KEYS:
    1 topics       SET    {P}:topics, all topic names
    2 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 brokerName   2 member "cluster|brokerAddr"   3 registration id (registerBroker's ARGV 23)
    4 checkEach "1" = write every topic whose queue data differ; "0" = only topics missing for this broker
      (the dataVersion is the one already registered, as registerBroker's step 10)
    5 wipeWrite "1" = register the queue data with the write bit cleared (prime slave, acting master on)
    6 stage "1" = also remember the names in {P}:rs:<id> (deleteTopicWithBrokerRegistration: registerFinish
      removes the broker's topics that are not among them once every chunk is in)
    7 topics: "name\tread,write,perm,sysFlag\n" repeated
  Returns:
    {1, changedTopics, elapsed µs of Redis time}
    {0}  fenced: another registration of this broker began or ended since, or the address left it (unregister,
         expiry, connection drop); nothing written but the removal of its own staged names
  Side effects:
    queue data of these topics for this broker, the topic set and the reverse index; publishes changed topics.
    Readers see the broker's topics arrive chunk by chunk: each topic's route is either as before or as registered.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1], ver = KEYS[2] }
local base = key_base(KEYS[1])

local started = rcall("TIME")
local name, member, regid = ARGV[1], ARGV[2], ARGV[3]
local check_each, wipe_write, stage = ARGV[4] == "1", ARGV[5] == "1", ARGV[6] == "1"
if regid == "" or rcall("HGET", base .. "b:" .. name, "rg") ~= regid
    or rcall("HGET", base .. "l:" .. member, "rg") ~= regid then
  if stage then rcall("UNLINK", base .. "rs:" .. regid) end  -- what it had staged is of no use now
  return { 0 }
end

local names, encs = parse_topic_lines(ARGV[7])
if stage and #names > 0 then
  local krs = base .. "rs:" .. regid
  for i = 1, #names, 4000 do rcall("SADD", krs, unpack(names, i, math.min(i + 3999, #names))) end
  rcall("PEXPIRE", krs, 600000)  -- a registration whose worker died leaves nothing behind for long
end
local ch = changes_new()
local changed = write_queue_datas(base, K.topics, name, names, encs, check_each, wipe_write, ch)
changes_publish(base, K.ver, ch)
return { 1, changed, elapsed_us(started) }
