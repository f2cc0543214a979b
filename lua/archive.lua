-- archive.lua: the Redis side of tiered storage (sidecar/tiered/, docs/architecture.md
-- "Tiered storage"). A segment object already uploaded is recorded in the partition's
-- segment list and its range removed from the stream, in this one script: readers see
-- the range in Redis or in the object store, never in neither.
--
-- KEYS[1] lease  skiff:{t/p}:cleaner (the archiver holds the partition's cleaner lease:
--                 remote storage requires cleanup.policy=delete, so no compactor does)
-- KEYS[2] meta  KEYS[3] log  KEYS[4] time index  KEYS[5] byte index
-- KEYS[6] remote  skiff:{t/p}:remote (sorted set, score = segment base offset)
-- ARGV[1] 'record' | 'drop'   ARGV[2] lease token
-- record: ARGV[3] the local log start the archiver read from, ARGV[4] the segment's end
--   (its last offset + 1), ARGV[5] its base offset, ARGV[6] its member, ARGV[7] the
--   bytes appended before its end, ARGV[8] its bytes. Reply: 1
--   recorded (now, or by an earlier run of the same call); 0 lease lost, partition gone or the local start moved (nothing done);
--   -1 the whole segment is below the log start now (nothing recorded: delete it).
-- drop: ARGV[3] member, ARGV[4] the segment's end, ARGV[5] the wake-up channel, ARGV[6]
--   its bytes, ARGV[7] the bytes appended before its end. The
--   segment leaves the list and the log start moves to its end if below (retention);
--   reply 1, or 0 when the lease is lost.

-- A retried `record` (its reply lost to a failover or restart) finds its segment
-- already listed: 1 again, so the caller never deletes a listed segment's object.
if ARGV[1] == 'record' and redis.call('ZSCORE', KEYS[6], ARGV[6]) then
  return 1
end
if redis.call('GET', KEYS[1]) ~= ARGV[2] then
  return 0
end
local meta = redis.call('HMGET', KEYS[2], 'hw', 'lso', 'llso', 'ls')
if not meta[1] then
  return 0
end
local lso = tonumber(meta[2])

if ARGV[1] == 'drop' then
  if redis.call('ZREM', KEYS[6], ARGV[3]) == 1 then
    redis.call('HINCRBY', KEYS[2], 'rbytes', -tonumber(ARGV[6]))
  end
  local finish = tonumber(ARGV[4])
  if finish > lso then
    -- lsob: the bytes appended before the log start's batch (the segment's end).
    redis.call('HSET', KEYS[2], 'lso', finish, 'rlso', finish, 'lsob', ARGV[7])
    redis.call('PUBLISH', ARGV[5], meta[1] .. ' ' .. finish .. (meta[4] and (' ' .. meta[4]) or ''))
  end
  return 1
end

local start = tonumber(meta[3] or '0')
if lso > start then
  start = lso
end
if start ~= tonumber(ARGV[3]) then
  return 0
end
local finish = tonumber(ARGV[4])
if lso >= finish then
  return -1
end
redis.call('ZADD', KEYS[6], tonumber(ARGV[5]), ARGV[6])
-- llsob: the bytes appended before llso; rbytes: the bytes in the object store.
redis.call('HSET', KEYS[2], 'llso', finish, 'llsob', ARGV[7])
redis.call('HINCRBY', KEYS[2], 'rbytes', tonumber(ARGV[8]))
redis.call('XTRIM', KEYS[3], 'MINID', '0-' .. (finish + 1))
-- Index members of archived batches go (the segment's member keeps its max timestamp
-- and bytes); members are base offsets, in order. The greatest member at or below the
-- segment's end stays, as lua/trim.lua keeps the one at or below lso: the time index
-- adds a member only when a batch raises the max timestamp, so that member's score
-- covers the batches from llso to the next member (retention and ListOffsets by time
-- rely on every batch in Redis being covered).
for _, key in ipairs({KEYS[4], KEYS[5]}) do
  while true do
    local head = redis.call('ZRANGE', key, 0, 100)
    local n = 0
    for i, m in ipairs(head) do
      if tonumber(m) <= finish then n = i else break end
    end
    if n > 1 then
      redis.call('ZREMRANGEBYRANK', key, 0, n - 2)
    end
    if n < 101 then
      break
    end
  end
end
return 1
