-- renew.lua: extend the leases of many locks in one call (the watchdog).
--
-- KEYS[i]       a lock hash (all in one cluster slot)
-- ARGV[2i-1]    the owner id expected in KEYS[i]
-- ARGV[2i]      the new lease of KEYS[i] in ms
--
-- Returns one integer per key: 1 renewed, 0 not held by that owner (the
-- lease is then left untouched, so a lock is never revived).

local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'owner') == ARGV[2 * i - 1] then
    redis.call('PEXPIRE', key, ARGV[2 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
