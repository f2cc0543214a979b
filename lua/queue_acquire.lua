-- queue_acquire.lua: re-acquire records whose lease expired or that were released.
-- Returns ids and delivery counts only: record bodies are read with XRANGE outside
-- Lua (docs/architecture.md, read path). New records come from XREADGROUP '>'.
--
-- KEYS[1] log stream skiff:{t/p}:log    KEYS[2] meta hash skiff:{t/p}:meta
-- KEYS[3] due hint skiff:{t/p}:q:<group>:due (see below)
-- ARGV[1] consumer group (q:<group>)    ARGV[2] holder (the new lease holder)
-- ARGV[3] lock ms                       ARGV[4] delivery limit
-- ARGV[5] max records                   ARGV[6] dead-letter holder of this caller
-- ARGV[7] due hint lifetime ms
-- A pending entry's idle time is its lease age: idle >= lock ms means the lease
-- expired (released entries are held by '~released' with a huge idle time).
--
-- The due hint spares the O(pending) XPENDING IDLE scan while nothing can be
-- available. It is a sorted set of lease start times (score = member): whenever leases
-- start (acquire, XREADGROUP, renew, dead-letter hold) their TIME is added after
-- them, a release adds 0. So every pending entry not yet available has a member at or
-- just after its lease start, and the scan is skipped while the earliest member + lock
-- ms is in the future (lock_ms changes apply at once). A scan that leaves nothing
-- available (found fewer than asked) removes the members older than now - lock ms
-- (their entries were available, so taken). No members (new, or unused for ARGV[7]
-- ms) means: scan.
--
-- Reply: {now ms, offset, delivery count, kind, ...}; kind 1: acquired by the holder
-- (count already incremented), kind 2: at the delivery limit, moved to the
-- dead-letter holder (the caller dead-letters and then acknowledges it), kind 3: a
-- rejected record whose dead-letter copy is still to be made (as kind 2).
-- Error NOGROUP when the consumer group does not exist yet (found when scanning).
local REJECTED = 1000000  -- count mark of rejected records (lua/queue_settle.lua)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = KEYS[3]
local lock = tonumber(ARGV[3])
local first = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
if first[1] and tonumber(first[2]) + lock > now then
  return {now}  -- no lease started early enough to have expired, none released
end
local lso = tonumber(redis.call('HGET', KEYS[2], 'lso') or '0')
local grp, holder = ARGV[1], ARGV[2]
local limit = tonumber(ARGV[4])
local pending = redis.pcall('XPENDING', KEYS[1], grp, 'IDLE', ARGV[3], '-', '+', ARGV[5])
if type(pending) == 'table' and pending.err then
  return redis.error_reply(pending.err)
end
local out = {now}
local claimed = false
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
      claimed = true
      table.insert(out, offset); table.insert(out, count - REJECTED); table.insert(out, 3)
    end
  elseif count >= limit then
    local got = redis.call('XCLAIM', KEYS[1], grp, ARGV[6], 0, id, 'RETRYCOUNT', count, 'JUSTID')
    if #got > 0 then
      claimed = true
      table.insert(out, offset); table.insert(out, count); table.insert(out, 2)
    end
  else
    -- XCLAIM drops the entry from the pending list when compaction deleted it.
    local got = redis.call('XCLAIM', KEYS[1], grp, holder, 0, id, 'RETRYCOUNT', count + 1, 'JUSTID')
    if #got > 0 then
      claimed = true
      table.insert(out, offset); table.insert(out, count + 1); table.insert(out, 1)
    end
  end
end
if #pending < tonumber(ARGV[5]) then
  -- Everything available was taken: later members cover what remains pending. (1 ms
  -- of margin: XPENDING may read the clock a moment before TIME did.)
  redis.call('ZREMRANGEBYSCORE', due, '-inf', now - lock - 1)
  claimed = true  -- and a member for now: a scan again within one lock, whatever happens
end
if claimed then
  redis.call('ZADD', due, now, now)
end
redis.call('PEXPIRE', due, ARGV[7])
return out
