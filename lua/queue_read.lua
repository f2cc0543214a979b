-- queue_read.lua: lease new records of a `record` topic to a holder (XREADGROUP '>'),
-- no more than the partition's cap on records in flight allows (Kafka's
-- group.share.partition.max.record.locks), and note the new leases in the due hint
-- (see lua/queue_acquire.lua). In flight: every pending entry, i.e. handed out and not
-- finished (acquired, or released and waiting to be acquired again). One script, so
-- two fetches on the partition cannot both take the last free places.
--
-- KEYS[1] log stream   KEYS[2] meta hash   KEYS[3] due hint skiff:{t/p}:q:<group>:due
-- ARGV[1] consumer group (q:<group>)   ARGV[2] holder   ARGV[3] max records
-- ARGV[4] cap on records in flight     ARGV[5] due hint lifetime ms
-- Reply: {now ms, log start offset, entries} (entries as XREADGROUP's, flat fields).
-- Error NOGROUP when the consumer group does not exist.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lso = tonumber(redis.call('HGET', KEYS[2], 'lso') or '0')
local pending = tonumber(redis.call('XPENDING', KEYS[1], ARGV[1])[1])
local n = math.min(tonumber(ARGV[3]), tonumber(ARGV[4]) - pending)
if n <= 0 then
  return {now, lso, {}}
end
local reply = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', n, 'STREAMS', KEYS[1], '>')
local entries = {}
if reply and reply[1] then
  entries = reply[1][2]
  redis.call('ZADD', KEYS[3], now, now)
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
return {now, lso, entries}
