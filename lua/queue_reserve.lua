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
-- ARGV[6] '1': read_committed (share.isolation.level): KEYS[3] (meta) is read and the
-- room ends at the last stable offset (`ls`, or the high watermark when no transaction
-- is open), counting from the group's last delivered entry plus every live
-- reservation, so no XREADGROUP reads past it (docs/transactions.md)
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
if ARGV[6] == '1' and room > 0 then
  local marks = redis.call('HMGET', KEYS[3], 'ls', 'hw')
  local stable = tonumber(marks[1] or marks[2] or '0')
  local next = 0  -- the offset after the last delivered entry (IDs are 0-<offset+1>)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local name, last
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
    if name == ARGV[1] then
      next = tonumber(string.match(last, '%-(%d+)$'))
    end
  end
  local reserved = 0
  for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    reserved = reserved + tonumber(string.match(member, ':(%d+)$'))
  end
  room = math.min(room, stable - next - reserved)
end
if room <= 0 then
  return 0
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[2] .. ':' .. room)
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return room
