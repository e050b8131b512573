--[[
  Import a whole KV config (namesrv admin kv import / kv copy): every namespace given, in one step, so no reader
  ever sees part of an import. With mode "dry" nothing is written and the same answer comes back, so a dry run
  shows exactly what the import would change.

  KEYS:
    1 kvns         SET    {P}:kvns, KV namespaces
    2 ver          STRING {P}:ver, registry version counter
  ARGV:
    1 mode        "apply" | "dry"
    2 replace     "1": keys of a given namespace missing from the import are deleted; "0": they are kept
    3 count       namespaces that follow
    then per namespace: its name, n, and n key, value pairs
  Returns:
    per namespace, in ARGV order: {existed 0/1, {key, value, ...} as it was before}
  Side effects:
    (apply) each namespace registered in kvns (an empty one too: it reads as an empty table, as in Java); keys
    set, and with replace the others deleted, on {P}:kv:<namespace> (derived from the hash-tagged base).
    Changed ORDER_TOPIC_CONFIG keys that are topic names are published on {prefix}:changes, with "!*": every
    registration's answer carries that table.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { kvns = KEYS[1], ver = KEYS[2] }
local base = key_base(KEYS[1])

local apply = ARGV[1] == "apply"
local replace = ARGV[2] == "1"
local count = tonumber(ARGV[3])
local ch = changes_new()
local order_changed = false
local out = {}
local i = 4
local PAIRS = 1000  -- HSET / HDEL arguments per call: unpack stays far below Lua's stack limit

-- An ORDER_TOPIC_CONFIG key set, changed or removed: the route of the topic it names changed.
local function order_key_changed(key)
  order_changed = true
  if is_topic_name(key) then changes_add(ch, key) end
end

for _ = 1, count do
  local ns = ARGV[i]
  local n = tonumber(ARGV[i + 1])
  i = i + 2
  local kkv = base .. "kv:" .. ns
  local before = rcall("HGETALL", kkv)
  local existed = rcall("SISMEMBER", K.kvns, ns)
  out[#out + 1] = { existed, before }
  if apply then
    local old = {}
    for j = 1, #before, 2 do old[before[j]] = before[j + 1] end
    local is_order = ns == "ORDER_TOPIC_CONFIG"
    local given, sets = {}, {}
    for j = 0, n - 1 do
      local key, value = ARGV[i + 2 * j], ARGV[i + 2 * j + 1]
      given[key] = true
      if old[key] ~= value then
        sets[#sets + 1] = key
        sets[#sets + 1] = value
        if is_order then order_key_changed(key) end
      end
    end
    rcall("SADD", K.kvns, ns)
    for j = 1, #sets, 2 * PAIRS do
      rcall("HSET", kkv, unpack(sets, j, math.min(j + 2 * PAIRS - 1, #sets)))
    end
    if replace then
      local gone = {}
      for j = 1, #before, 2 do
        local key = before[j]
        if not given[key] then
          gone[#gone + 1] = key
          if is_order then order_key_changed(key) end
        end
      end
      for j = 1, #gone, PAIRS do
        rcall("HDEL", kkv, unpack(gone, j, math.min(j + PAIRS - 1, #gone)))
      end
    end
  end
  i = i + 2 * n
end

if order_changed then
  changes_add_state(ch, "*")  -- every registration's answer carries this table
  changes_publish(base, K.ver, ch)
end
return out
