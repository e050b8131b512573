--[[
  One bounded page of (cluster, broker, topic) rows for a snapshot, so Redis is never blocked long.

  KEYS:
    1 topics       SET    {P}:topics, all topic names
  ARGV:
    1 cursor over the topic set ("0" to start)   2 page size (SSCAN COUNT hint)
  Returns:
    {nextCursor ("0" = done), {cluster, brokerName, topic, "r,w,perm,sys", ...}}
  Side effects: none. A snapshot is a sequence of consistent pages, not one atomic read.
]]
local rcall = redis.call
--- @include "includes/common"
local K = { topics = KEYS[1] }
local base = key_base(KEYS[1])

local res = rcall("SSCAN", K.topics, ARGV[1], "COUNT", tonumber(ARGV[2]))
local clusters = {}
local out = {}
for _, t in ipairs(res[2]) do
  local qflat = rcall("HGETALL", base .. "t:" .. t)
  for i = 1, #qflat, 2 do
    local b = qflat[i]
    if serves(base, b, t) then  -- not a field a sweep has yet to clear
      local c = clusters[b]
      if c == nil then
        c = rcall("HGET", base .. "b:" .. b, "cluster") or ""
        clusters[b] = c
      end
      out[#out + 1] = c
      out[#out + 1] = b
      out[#out + 1] = t
      out[#out + 1] = qflat[i + 1]
    end
  end
end
return { res[1], out }
