-- trim.lua: move a partition's log start offset forward and free what lies below it,
-- doing a bounded amount of work per call (callers loop while the reply says more).
-- Used by DeleteRecords (an explicit offset) and the retention sweeper (retention.ms /
-- retention.bytes). Idempotent: lso only grows, so sidecars may run it concurrently.
--
-- KEYS[1] log stream  KEYS[2] meta hash  KEYS[3] time index  KEYS[4] byte index
-- KEYS[5] aborted-transaction index (entries whose ABORT marker is below lso go)
-- ARGV[1] mode: 'offset' (DeleteRecords) or 'retention'
-- ARGV[2] offset mode: the new log start, -1 for the high watermark
-- ARGV[3] retention.ms (-1: off)     ARGV[4] retention.bytes (-1: off)
-- ARGV[5] XTRIM LIMIT (entries, at least stream-node-max-entries)
-- ARGV[6] index members to prune per call
-- ARGV[7] the partition's wake-up channel (a moved log start is PUBLISHed: "hw lso")
-- Reply: {log start offset, high watermark, 1 if more work remains else 0}
-- Errors (nothing written): UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE.

local meta = redis.call('HMGET', KEYS[2], 'hw', 'lso', 'bytes', 'cbytes', 'ls', 'llso')
if not meta[1] then
  return redis.error_reply('UNKNOWN_TOPIC_OR_PARTITION')
end
local hw = tonumber(meta[1])
local lso = tonumber(meta[2])
local new_lso = lso

if ARGV[1] == 'offset' then
  local target = tonumber(ARGV[2])
  if target == -1 then
    target = hw
  end
  if target < 0 or target > hw then
    return redis.error_reply('OFFSET_OUT_OF_RANGE The offset ' .. target ..
      ' is not valid: the high watermark is ' .. hw)
  end
  if target > new_lso then
    new_lso = target
  end
else
  local retention_ms = tonumber(ARGV[3])
  if retention_ms >= 0 then
    -- Scores are the running max timestamp, so every batch before the first member
    -- scored >= cutoff has all its records older than the cutoff (Kafka deletes a
    -- segment whose largest timestamp is older than now - retention.ms).
    local t = redis.call('TIME')
    local cutoff = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - retention_ms
    local hit = redis.call('ZRANGEBYSCORE', KEYS[3], cutoff, '+inf', 'LIMIT', 0, 1)
    local candidate
    if hit[1] then
      candidate = tonumber(hit[1])
      -- Tiered storage: below the local log start (llso) the batches are in the object
      -- store, their times not in this index. When the first batch left here is not
      -- expired, neither may they be: the archiver drops expired segments first.
      if meta[6] and tonumber(meta[6]) > lso and
          redis.call('ZRANGE', KEYS[3], 0, 0)[1] == hit[1] then
        candidate = nil
      end
    elseif redis.call('ZCARD', KEYS[3]) > 0 then
      candidate = hw  -- every record is expired: the log start becomes the high watermark
    end
    if candidate and candidate > new_lso then
      new_lso = candidate
    end
  end
  local retention_bytes = tonumber(ARGV[4])
  if retention_bytes == 0 then
    new_lso = hw
  elseif retention_bytes > 0 then
    local limit = tonumber(meta[3] or '0') - retention_bytes - tonumber(meta[4] or '0')
    local hit = redis.call('ZREVRANGEBYSCORE', KEYS[4], limit, '-inf', 'LIMIT', 0, 1)
    if hit[1] and tonumber(hit[1]) > new_lso then
      new_lso = tonumber(hit[1])
    end
  end
end

if new_lso > lso then
  lso = new_lso
  redis.call('HSET', KEYS[2], 'lso', lso)
  if ARGV[1] ~= 'offset' then
    -- rlso: the log start retention set. Retention removes the records below it, as
    -- Kafka deletes segments; DeleteRecords only moves the log start, as in Kafka,
    -- whose segment (and max timestamp) stays.
    redis.call('HSET', KEYS[2], 'rlso', lso)
  end
  -- Sidecars keep each partition's watermarks for long polls (longpoll.py).
  redis.call('PUBLISH', ARGV[7], hw .. ' ' .. lso .. (meta[5] and (' ' .. meta[5]) or ''))
end

-- Free what lies below the log start, bounded. `~` removes whole stream nodes only.
local removed = redis.call('XTRIM', KEYS[1], 'MINID', '~', '0-' .. (lso + 1), 'LIMIT',
  tonumber(ARGV[5]))

-- Index members below the log start go, but the greatest one at or below it stays:
-- it is the batch holding lso (ListOffsets by time starts there; the byte index's
-- first score is the bytes before it).
local k = tonumber(ARGV[6])
local function prune(key)
  local head = redis.call('ZRANGE', key, 0, k)
  local n = 0
  for i, m in ipairs(head) do
    if tonumber(m) <= lso then n = i else break end
  end
  if n > 1 then
    redis.call('ZREMRANGEBYRANK', key, 0, n - 2)
  end
  return n == k + 1
end
local more = prune(KEYS[3])
more = prune(KEYS[4]) or more
-- Aborted transactions whose ABORT marker lies below the log start: no fetch reaches
-- them any more (Kafka deletes a segment's transaction index with the segment).
local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. lso, 'LIMIT', 0, k)
if #gone > 0 then
  redis.call('ZREM', KEYS[5], unpack(gone))
  more = more or #gone == k
end
-- lsob: the bytes appended before the batch holding lso (exact once pruning is done).
local head = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if lso == hw then
  redis.call('HSET', KEYS[2], 'lsob', meta[3] or 0)
elseif head[2] then
  redis.call('HSET', KEYS[2], 'lsob', head[2])
end
if removed > 0 then
  more = true
end
return {lso, hw, more and 1 or 0}
