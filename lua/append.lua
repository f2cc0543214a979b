-- append.lua: append one Kafka record batch to a partition, atomically.
--
-- KEYS[1] log stream   skiff:{t/p}:log
-- KEYS[2] meta hash    skiff:{t/p}:meta        (hw, lso, maxts, maxtsoff)
-- KEYS[3] time index   skiff:{t/p}:time        (score max timestamp, member base offset)
-- KEYS[4] producers    skiff:{t/p}:producers   (pid -> cjson {e=epoch, t=last append ms,
--                                               b={{first seq, last seq, base offset},..}})
-- KEYS[5] tokens       skiff:{t/p}:tokens      (score base offset, member append token)
-- ARGV[1] n records          ARGV[2] timestamp type (0 CreateTime, 1 LogAppendTime)
-- ARGV[3] batch max ts       ARGV[4] offset delta of the record with the max ts
-- ARGV[5] producer id (-1)   ARGV[6] producer epoch   ARGV[7] base sequence
-- ARGV[8] wake-up channel    ARGV[9] append token (unique per prepared append)
-- ARGV[10] producer.id.expiration.ms
-- ARGV[11..] per record: t (ms), k, v, h (Kafka header encoding), f (flags)
-- Reply: {base offset, log start offset, append time or -1, 1 if duplicate else 0}
-- Errors (nothing written): UNKNOWN_TOPIC_OR_PARTITION, INVALID_RECORD,
-- INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER.

local FIXED = 10
local KEEP_TOKENS = 64
local n = tonumber(ARGV[1])
local meta = redis.call('HMGET', KEYS[2], 'hw', 'lso', 'maxts')
if not meta[1] then
  return redis.error_reply('UNKNOWN_TOPIC_OR_PARTITION')
end
if n == nil or n < 1 or #ARGV ~= FIXED + 5 * n then
  return redis.error_reply('INVALID_RECORD bad argument count')
end
local lso = tonumber(meta[2])

-- A sidecar that lost the reply (timeout, dropped connection) resends the same
-- append: its token is remembered with the base offset, so it is not written twice.
local token = ARGV[9]
local seen = redis.call('ZSCORE', KEYS[5], token)
if seen then
  return {tonumber(seen), lso, -1, 1}
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
      return redis.error_reply('INVALID_PRODUCER_EPOCH producer ' .. pid .. ' epoch ' ..
        epoch .. ' is older than ' .. pstate.e)
    end
    if epoch == pstate.e then
      for _, b in ipairs(pstate.b) do
        if b[1] == seq and b[2] == seq + n - 1 then
          return {b[3], lso, -1, 1}
        end
      end
      local last = pstate.b[#pstate.b]
      if last then
        local expected = last[2] + 1
        if expected > 2147483647 then expected = 0 end
        if seq ~= expected then
          return redis.error_reply('OUT_OF_ORDER_SEQUENCE_NUMBER producer ' .. pid ..
            ' sent sequence ' .. seq .. ', expected ' .. expected)
        end
      end
    else
      if seq ~= 0 then
        return redis.error_reply('OUT_OF_ORDER_SEQUENCE_NUMBER producer ' .. pid ..
          ' starts epoch ' .. epoch .. ' at sequence ' .. seq .. ', expected 0')
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
end

local log = KEYS[1]
local first, last
for i = FIXED + 1, FIXED + 5 * n, 5 do
  local t = ARGV[i]
  if append_time >= 0 then
    t = append_time
  end
  last = redis.call('XADD', log, '0-*', 't', t, 'k', ARGV[i + 1], 'v', ARGV[i + 2],
    'h', ARGV[i + 3], 'f', ARGV[i + 4])
  if not first then
    first = last
  end
end

-- Stream IDs are 0-<offset+1>, so offset = sequence - 1.
local base = tonumber(string.sub(first, 3)) - 1
local hw = tonumber(string.sub(last, 3))
redis.call('HSET', KEYS[2], 'hw', hw)

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

redis.call('ZADD', KEYS[5], base, token)
redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -KEEP_TOKENS - 1)

redis.call('PUBLISH', ARGV[8], hw)
return {base, lso, append_time, 0}
