--[[
  One bounded step of a broker sweep: what a removal left undone because the broker had too many topics for one
  script (unregister, expiry, a closed connection; lua/includes/brokers.lua queues the sweep).

  KEYS:
    1 topics       SET    {P}:topics, all topic names
    2 ver          STRING {P}:ver, registry version counter
    3 sweeps       HASH   {P}:sweeps, sweep id -> "kind\tbrokerName\twipe 0/1\tcursor"; "#" -> the id counter
  ARGV:
    1 sweep id ("" = none: only list the sweeps under way)
    2 topics per step (SPOP count / SSCAN COUNT)
  Returns:
    {more 0/1, {id, ...}, done, elapsed}  more = 1 while this sweep has steps left; the ids of every sweep under
                           way (a worker that died mid-sweep leaves its sweep for the scheduler's next tick); the
                           topics this step handled and its Redis time in µs
  Kinds:
    r  the broker is gone and its reverse index was renamed to {P}:sw:<id>: pop `count` topics, delete the broker's
       queue data of each unless the topic is in bt:<brokerName> again (the broker registered again since and
       wrote it: that field is the new registration's), and the topic with its last queue data
    n  the broker lost an address (or filter servers) but stays: walk bt:<brokerName> (SSCAN from the cursor) and
       name each topic in change events; with wipe, clear the write bit of its queue data while the broker still
       has no id 0 and acting master on (RocketMQ's unregister rule, as remove_addr applies it to small brokers)
  Side effects:
    route tables, {P}:sw:<id> emptied, the sweep's entry removed when done; publishes the step's topics on
    {prefix}:changes. Each call O(count).
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1], ver = KEYS[2], sweeps = KEYS[3] }
local base = key_base(KEYS[1])

local started = rcall("TIME")
local id, count = ARGV[1], tonumber(ARGV[2])
local function under_way()
  local ids = {}
  for _, f in ipairs(rcall("HKEYS", K.sweeps)) do
    if f ~= "#" then ids[#ids + 1] = f end
  end
  return ids
end

local job = id ~= "" and rcall("HGET", K.sweeps, id)
if not job then return { 0, under_way(), 0, elapsed_us(started) } end
local kind, name, wipe, cursor = string.match(job, "^(%a)\t([^\t]*)\t(%d)\t(%d+)$")
local kbt = base .. "bt:" .. name
local ch = changes_new()
local more
local done = 0
if kind == "r" then
  local ksw = base .. "sw:" .. id
  local popped = rcall("SPOP", ksw, count)
  done = #popped
  for _, t in ipairs(popped) do
    if rcall("SISMEMBER", kbt, t) == 0 then
      local kt = base .. "t:" .. t
      rcall("HDEL", kt, name)
      topic_drop_if_unserved(base, K.topics, kt, t)
    end
    changes_add(ch, t)
  end
  more = rcall("EXISTS", ksw) == 1
else
  local res = rcall("SSCAN", kbt, cursor, "COUNT", count)
  done = #res[2]
  local wiping = wipe == "1" and rcall("HGET", base .. "b:" .. name, "enableActingMaster") == "1"
    and rcall("HEXISTS", base .. "ba:" .. name, "0") == 0
  local wiped = false
  for _, t in ipairs(res[2]) do
    changes_add(ch, t)
    if wiping and wipe_write_of(base, name, t) then wiped = true end
  end
  if wiped then topics_touched(base, name) end
  more = res[1] ~= "0"
  if more then rcall("HSET", K.sweeps, id, kind .. "\t" .. name .. "\t" .. wipe .. "\t" .. res[1]) end
end
if not more then
  rcall("HDEL", K.sweeps, id)
  -- With no sweep left the counter may restart (as tg's): a worker still stepping an id that was reused only
  -- helps the new sweep along, and its sw:<id> cannot exist before this one is done.
  if rcall("HLEN", K.sweeps) == 1 then rcall("DEL", K.sweeps) end
end
changes_publish(base, K.ver, ch)
return { more and 1 or 0, under_way(), done, elapsed_us(started) }
