-- once_check.lua: read the record of a job that runs once (per key, or per
-- period), and which period the server's clock is in. Not prepended with
-- lib.lua.
--
-- KEYS[1]  the job's record  {key}:done  'period token ms pid host'..."\n"..err
-- ARGV[1]  the period in ms, or 0 for a job that runs once per key
--
-- Returns {period now (0 without a period), the record or false}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local period = tonumber(ARGV[1])
local p = 0
if period > 0 then
  p = math.floor(now / period)
end
return {string.format('%d', p), redis.call('GET', KEYS[1])}
