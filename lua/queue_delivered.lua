-- queue_delivered.lua: note the leases XREADGROUP just started in the due hint (see
-- lua/queue_acquire.lua). Runs in the same MULTI, right after the XREADGROUP.
--
-- KEYS[1] due hint skiff:{t/p}:q:<group>:due
-- ARGV[1] due hint lifetime ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, now)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return now
