-- queue_acquire.lua: re-acquire records whose lease expired or that were released.
-- Returns ids and delivery counts only: record bodies are read with XRANGE outside
-- Lua (docs/architecture.md, read path). New records come from XREADGROUP '>'.
--
-- KEYS[1] log stream skiff:{t/p}:log    KEYS[2] meta hash skiff:{t/p}:meta
-- ARGV[1] consumer group (q:<group>)    ARGV[2] holder (the new lease holder)
-- ARGV[3] lock ms                       ARGV[4] delivery limit
-- ARGV[5] max records                   ARGV[6] dead-letter holder of this caller
-- A pending entry's idle time is its lease age: idle >= lock ms means the lease
-- expired (released entries are held by '~released' with a huge idle time).
-- Reply: {now ms, offset, delivery count, kind, ...}; kind 1: acquired by the holder
-- (count already incremented), kind 2: at the delivery limit, moved to the
-- dead-letter holder (the caller dead-letters and then acknowledges it), kind 3: a
-- rejected record whose dead-letter copy is still to be made (as kind 2).
-- Error NOGROUP when the consumer group does not exist yet.
local REJECTED = 1000000  -- count mark of rejected records (lua/queue_settle.lua)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lso = tonumber(redis.call('HGET', KEYS[2], 'lso') or '0')
local grp, holder = ARGV[1], ARGV[2]
local limit = tonumber(ARGV[4])
local pending = redis.pcall('XPENDING', KEYS[1], grp, 'IDLE', ARGV[3], '-', '+', ARGV[5])
if type(pending) == 'table' and pending.err then
  return redis.error_reply(pending.err)
end
local out = {now}
for _, p in ipairs(pending) do
  local id, count = p[1], tonumber(p[4])
  local offset = tonumber(string.sub(id, 3)) - 1
  if offset < lso then
    -- Below the log start (retention, DeleteRecords): gone, so finished.
    redis.call('XACK', KEYS[1], grp, id)
  elseif count >= REJECTED then
    -- Rejected, its dead-letter copy not made (the sidecar copying it failed or died).
    local got = redis.call('XCLAIM', KEYS[1], grp, ARGV[6], 0, id, 'RETRYCOUNT', count, 'JUSTID')
    if #got > 0 then
      table.insert(out, offset); table.insert(out, count - REJECTED); table.insert(out, 3)
    end
  elseif count >= limit then
    local got = redis.call('XCLAIM', KEYS[1], grp, ARGV[6], 0, id, 'RETRYCOUNT', count, 'JUSTID')
    if #got > 0 then
      table.insert(out, offset); table.insert(out, count); table.insert(out, 2)
    end
  else
    -- XCLAIM drops the entry from the pending list when compaction deleted it.
    local got = redis.call('XCLAIM', KEYS[1], grp, holder, 0, id, 'RETRYCOUNT', count + 1, 'JUSTID')
    if #got > 0 then
      table.insert(out, offset); table.insert(out, count + 1); table.insert(out, 1)
    end
  end
end
return out
