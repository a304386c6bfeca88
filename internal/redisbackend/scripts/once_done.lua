-- once_done.lua: record that a job that runs once has run, if its runner
-- still holds the job's lock: the record is fenced by the lock's token, so
-- a runner whose lease ended (it was paused) cannot record a run over the
-- one that took its place. Not prepended with lib.lua.
--
-- KEYS[1]  the job's lock hash  {key}
-- KEYS[2]  the job's record     {key}:done
-- ARGV[1]  the runner's token
-- ARGV[2]  the record (see once_check.lua)
-- ARGV[3]  how long the record lasts, in ms
--
-- Returns 1 if it recorded the run, 0 if the lock was not held with that
-- token.

if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
