-- queue_reserve.lua: reserve room for new records of a `record` topic under the
-- partition's cap on records in flight (Kafka's group.share.partition.max.record.locks).
-- In flight: every pending entry (acquired, or released and waiting to be acquired
-- again) plus the live reservations of fetches about to XREADGROUP. The caller reads
-- with XREADGROUP COUNT room outside Lua (record bodies never pass through Lua) and
-- drops its reservation in the same MULTI, when the records it read became pending.
-- A reservation left behind (the sidecar died in between) frees its room on expiry.
--
-- KEYS[1] log stream   KEYS[2] reservations zset skiff:{t/p}:q:<group>:resv
--                      (member "<token>:<count>", score: expiry ms)
-- ARGV[1] consumer group (q:<group>)   ARGV[2] token   ARGV[3] max records
-- ARGV[4] cap on records in flight     ARGV[5] reservation lifetime ms
-- Reply: the room reserved (0: none, nothing stored).
-- Error NOGROUP when the consumer group does not exist.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local held = tonumber(redis.call('XPENDING', KEYS[1], ARGV[1])[1])
for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  held = held + tonumber(string.match(member, ':(%d+)$'))
end
local room = math.min(tonumber(ARGV[3]), tonumber(ARGV[4]) - held)
if room <= 0 then
  return 0
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[2] .. ':' .. room)
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return room
