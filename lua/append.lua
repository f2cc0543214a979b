-- append.lua: append one Kafka record batch to a partition, atomically.
--
-- KEYS[1] log stream   skiff:{t/p}:log
-- KEYS[2] meta hash    skiff:{t/p}:meta        (hw, lso, maxts, maxtsoff)
-- KEYS[3] time index   skiff:{t/p}:time        (score max timestamp, member base offset)
-- KEYS[4] producers    skiff:{t/p}:producers   (pid -> cjson {e=epoch, t=last append ms,
--                                               b={{first seq, last seq, base offset},..}})
-- KEYS[5] tokens       skiff:{t/p}:tokens      (score base offset, member append token)
-- KEYS[6] byte index   skiff:{t/p}:bytes       (score bytes appended before the batch,
--                                               member base offset)
-- KEYS[7] open txns    skiff:{t/p}:txns        only for a transactional batch: pid ->
--                                               first offset of its open transaction here
--                                               (meta 'ls', the last stable offset, is the
--                                               least of them; lua/txn_marker.lua)
-- ARGV[1] n: offsets the batch takes   ARGV[2] timestamp type (0 CreateTime,
--         1 LogAppendTime stamped here, 2 LogAppendTime the sidecar stamped: ARGV[3])
-- ARGV[3] batch max ts       ARGV[4] offset delta of the record with the max ts
-- ARGV[5] producer id (-1)   ARGV[6] producer epoch   ARGV[7] base sequence
-- ARGV[8] wake-up channel    ARGV[9] append token (unique per prepared append)
-- ARGV[10] producer.id.expiration.ms
-- ARGV[11] the batch's size in bytes (docs/architecture.md, "Byte accounting")
-- ARGV[12] retention.bytes (-1: no size retention)
-- ARGV[13] the storage identity (cluster id) the sidecar serves under (storage/identity.py)
-- ARGV[14] storage format: 'r' (record) or 'b' (batch), docs/architecture.md; or 'x': a
--          batch that the sidecar XADDed right before this script, in the same
--          MULTI/EXEC (NOMKSTREAM, ID 0-<ARGV[15] + n>), so that its bytes never pass
--          through Lua (storage/store.py, "external" appends)
-- ARGV[15..] 'r': per record t (ms), k, v, h (Kafka header encoding), f (flags), one
--            entry each, ID 0-<offset+1>; a transactional batch's (KEYS[7] given) also
--            get p = "<producer id> <epoch>";
--            'b': the v2 batch's bytes, one entry (field b) with ID 0-<last offset+1>,
--            so XRANGE from 0-<o+1> starts at the batch holding offset o;
--            'x': the base offset the sidecar predicted (the partition's hw)
-- Reply: {base offset, log start offset, append time or -1, 1 if duplicate else 0}
-- Errors (nothing written): UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR (the
-- partition was created under another storage identity), INVALID_RECORD,
-- INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER; for 'x' also
-- SKIFF_MISPREDICT <hw> (the prediction was wrong: the sidecar appends again with 'b').
-- With 'x', every outcome that appends nothing (errors, resent tokens, duplicates)
-- first removes the entry the XADD added, if it did: the log's last ID is always the
-- high watermark on `batch` topics (lua/cleaner.lua keeps it so too), so the XADD
-- added an entry exactly when its ID is above the stored hw.

local FIXED = 14
local PRUNE = 128  -- index members pruned per append at most (as FREE_STEP)
local FREE_STEP = 128  -- offsets: see size retention below
local KEEP_TOKENS = 64
local n = tonumber(ARGV[1])
local meta = redis.call('HMGET', KEYS[2], 'hw', 'lso', 'maxts', 'bytes', 'cbytes', 'sid', 'ls')
local external = ARGV[14] == 'x'

-- Appends nothing: with 'x', first take back what the XADD before the script added.
local function refuse(reply)
  if external then
    local id = (tonumber(ARGV[FIXED + 1]) or 0) + (n or 0)
    local stored = tonumber(meta[1])
    if stored == nil or id > stored then
      if redis.call('XDEL', KEYS[1], '0-' .. id) == 1 and stored then
        redis.call('XSETID', KEYS[1], '0-' .. stored)
      end
    end
  end
  return reply
end

if not meta[1] then
  return refuse(redis.error_reply('UNKNOWN_TOPIC_OR_PARTITION'))
end
-- A partition belongs to the storage identity it was created under: a sidecar serving
-- another one (Redis lost its data and the partition was made again, or another Redis
-- answers) must not append, or offsets it handed out before would be handed out again.
-- A partition from a version without identities (no sid) is adopted.
if ARGV[13] == '' or (meta[6] and meta[6] ~= ARGV[13]) then
  return refuse(redis.error_reply('KAFKA_STORAGE_ERROR partition created under storage identity ' ..
    tostring(meta[6] or '-') .. ', this sidecar serves ' .. ARGV[13]))
end
if not meta[6] then
  redis.call('HSET', KEYS[2], 'sid', ARGV[13])
end
local batch_mode = ARGV[14] == 'b' or external
if n == nil or n < 1 or #ARGV ~= (batch_mode and FIXED + 1 or FIXED + 5 * n) then
  return refuse(redis.error_reply('INVALID_RECORD bad argument count'))
end
local lso = tonumber(meta[2])

-- A sidecar that lost the reply (timeout, dropped connection) resends the same
-- append: its token is remembered with the base offset, so it is not written twice.
local token = ARGV[9]
local seen = redis.call('ZSCORE', KEYS[5], token)
if seen then
  return refuse({tonumber(seen), lso, -1, 1})
end

-- Index members below the log start go in steps of k (amortised: one O(log n) look per
-- append), keeping the greatest one at or below lso (the batch holding it).
local function prune(key, start, k)
  local probe = redis.call('ZRANGE', key, k, k)
  if probe[1] and tonumber(probe[1]) <= start then
    redis.call('ZREMRANGEBYRANK', key, 0, k - 1)
  end
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Idempotent producer, as Kafka's ProducerStateManager: a resent batch (same epoch
-- and sequence range as one of the last five) gets its original offset back and
-- writes nothing; an older epoch is refused; within an epoch sequences must follow
-- on; a new epoch starts at 0. A producer unknown here (never seen, or expired after
-- producer.id.expiration.ms) may start at any sequence (KIP-360).
local pid = ARGV[5]
local pstate
local now
if pid ~= '-1' then
  now = now_ms()
  local raw = redis.call('HGET', KEYS[4], pid)
  local epoch = tonumber(ARGV[6])
  local seq = tonumber(ARGV[7])
  if raw then
    pstate = cjson.decode(raw)
    if pstate.t and now - pstate.t > tonumber(ARGV[10]) then
      pstate = nil
    end
  end
  if pstate then
    if epoch < pstate.e then
      return refuse(redis.error_reply('INVALID_PRODUCER_EPOCH producer ' .. pid ..
        ' epoch ' .. epoch .. ' is older than ' .. pstate.e))
    end
    if epoch == pstate.e then
      for _, b in ipairs(pstate.b) do
        if b[1] == seq and b[2] == seq + n - 1 then
          return refuse({b[3], lso, -1, 1})
        end
      end
      local last = pstate.b[#pstate.b]
      if last then
        local expected = last[2] + 1
        if expected > 2147483647 then expected = 0 end
        if seq ~= expected then
          return refuse(redis.error_reply('OUT_OF_ORDER_SEQUENCE_NUMBER producer ' .. pid ..
            ' sent sequence ' .. seq .. ', expected ' .. expected))
        end
      end
    else
      if seq ~= 0 then
        return refuse(redis.error_reply('OUT_OF_ORDER_SEQUENCE_NUMBER producer ' .. pid ..
          ' starts epoch ' .. epoch .. ' at sequence ' .. seq .. ', expected 0'))
      end
      pstate = {e = epoch, b = {}}
    end
  else
    pstate = {e = epoch, b = {}}
  end
end

local append_time = -1
if ARGV[2] == '1' then
  append_time = now or now_ms()
elseif ARGV[2] == '2' then
  append_time = tonumber(ARGV[3])
end

local log = KEYS[1]
local base, hw
if batch_mode then
  base = tonumber(meta[1])
  hw = base + n
  if not external then
    redis.call('XADD', log, '0-' .. hw, 'b', ARGV[FIXED + 1])
  elseif tonumber(ARGV[FIXED + 1]) ~= base then
    return refuse(redis.error_reply('SKIFF_MISPREDICT ' .. base))
  end
else
  local first, last
  -- A transactional record carries its producer (field p), which Fetch puts in the
  -- batch header so read_committed readers can drop aborted transactions' records.
  local producer = KEYS[7] and (pid .. ' ' .. ARGV[6])
  for i = FIXED + 1, FIXED + 5 * n, 5 do
    local t = ARGV[i]
    if append_time >= 0 then
      t = append_time
    end
    if producer then
      last = redis.call('XADD', log, '0-*', 't', t, 'k', ARGV[i + 1], 'v', ARGV[i + 2],
        'h', ARGV[i + 3], 'f', ARGV[i + 4], 'p', producer)
    else
      last = redis.call('XADD', log, '0-*', 't', t, 'k', ARGV[i + 1], 'v', ARGV[i + 2],
        'h', ARGV[i + 3], 'f', ARGV[i + 4])
    end
    if not first then
      first = last
    end
  end
  -- Stream IDs are 0-<offset+1>, so offset = sequence - 1.
  base = tonumber(string.sub(first, 3)) - 1
  hw = tonumber(string.sub(last, 3))
end
-- Byte accounting: the index maps cumulative bytes to batch base offsets, so size
-- retention finds the new log start with one O(log n) lookup.
local before = tonumber(meta[4] or '0')
local total = before + tonumber(ARGV[11])
redis.call('ZADD', KEYS[6], before, base)
redis.call('HSET', KEYS[2], 'hw', hw, 'bytes', total)

local max_ts = tonumber(ARGV[3])
if append_time >= 0 then
  max_ts = append_time
end
-- The time index only grows: one member per batch that raises the partition's max
-- timestamp, so the first member with score >= T bounds a lookup for T.
if max_ts > tonumber(meta[3] or '-1') then
  redis.call('ZADD', KEYS[3], max_ts, base)
  redis.call('HSET', KEYS[2], 'maxts', max_ts, 'maxtsoff', base + tonumber(ARGV[4]))
end

if pstate then
  table.insert(pstate.b, {tonumber(ARGV[7]), tonumber(ARGV[7]) + n - 1, base})
  if #pstate.b > 5 then
    table.remove(pstate.b, 1)
  end
  pstate.t = now
  redis.call('HSET', KEYS[4], pid, cjson.encode(pstate))
end

-- Size retention, as Kafka's deleteRetentionSizeBreachedSegments with batches for
-- segments: drop the oldest batches while what remains is still >= retention.bytes.
local retention = tonumber(ARGV[12])
if retention >= 0 then
  local new_lso, new_lsob = lso, nil
  if retention == 0 then
    new_lso, new_lsob = hw, total
  else
    local limit = total - retention - tonumber(meta[5] or '0')
    local hit = redis.call('ZREVRANGEBYSCORE', KEYS[6], limit, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if hit[1] and tonumber(hit[1]) > new_lso then
      new_lso, new_lsob = tonumber(hit[1]), hit[2]
    end
  end
  if new_lso > lso then
    local crossed = math.floor(new_lso / FREE_STEP) > math.floor(lso / FREE_STEP)
    lso = new_lso
    -- lsob: the bytes appended before the batch holding lso (sizes are bytes - lsob).
    -- rlso: the log start retention set (ListOffsets' max timestamp, see store.py).
    redis.call('HSET', KEYS[2], 'lso', lso, 'lsob', new_lsob, 'rlso', lso)
    -- Memory below the log start is freed once lso crosses a multiple of FREE_STEP
    -- offsets (small batches then skip it on most appends). LIMIT 0: `~` trims are not
    -- capped; whole stream nodes below lso may stay (lso in meta is what reads go by).
    -- Index members go a bounded number per append (lua/trim.lua removes the rest).
    if crossed then
      redis.call('XTRIM', log, 'MINID', '~', '0-' .. (lso + 1), 'LIMIT', 0)
      prune(KEYS[3], lso, PRUNE)
      prune(KEYS[6], lso, PRUNE)
    end
  end
end

-- A transactional batch opens the producer's transaction on this partition, unless it
-- is open already: the last stable offset stays at the first open transaction's start.
local stable = meta[7]
if KEYS[7] and redis.call('HSETNX', KEYS[7], pid, base) == 1 and not stable then
  stable = base
  redis.call('HSET', KEYS[2], 'ls', base)
end

redis.call('ZADD', KEYS[5], base, token)
redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -KEEP_TOKENS - 1)

-- "hw lso", and the last stable offset while a transaction is open here: a sidecar
-- keeps them for long polls at the end of the log (longpoll.py).
redis.call('PUBLISH', ARGV[8], hw .. ' ' .. lso .. (stable and (' ' .. stable) or ''))
return {base, lso, append_time, 0}
