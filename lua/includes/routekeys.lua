-- The eight registry keys every route script receives, by role.
local K = {
  topics = KEYS[1], brokers = KEYS[2], clusters = KEYS[3], live = KEYS[4],
  deadlines = KEYS[5], filters = KEYS[6], ver = KEYS[7], kvns = KEYS[8],
}
local base = key_base(KEYS[1])
