-- append.lua: append one Kafka record batch to a partition, atomically.
--
-- KEYS[1] log stream   skiff:{t/p}:log
-- KEYS[2] meta hash    skiff:{t/p}:meta        (hw, lso, maxts, maxtsoff)
-- KEYS[3] time index   skiff:{t/p}:time        (score max timestamp, member base offset)
-- KEYS[4] producers    skiff:{t/p}:producers   (pid -> cjson {e=epoch, b={{seq,last,off},..}})
-- ARGV[1] n records          ARGV[2] timestamp type (0 CreateTime, 1 LogAppendTime)
-- ARGV[3] batch max ts       ARGV[4] offset delta of the record with the max ts
-- ARGV[5] producer id (-1)   ARGV[6] producer epoch   ARGV[7] base sequence
-- ARGV[8] wake-up channel
-- ARGV[9..] per record: t (ms), k, v, h (Kafka header encoding), f (1 key null, 2 value null)
-- Reply: {base offset, log start offset, append time or -1, 1 if duplicate else 0}
-- Errors (nothing written): UNKNOWN_TOPIC_OR_PARTITION, INVALID_RECORD.

local n = tonumber(ARGV[1])
local meta = redis.call('HMGET', KEYS[2], 'hw', 'lso', 'maxts')
if not meta[1] then
  return redis.error_reply('UNKNOWN_TOPIC_OR_PARTITION')
end
if n == nil or n < 1 or #ARGV ~= 8 + 5 * n then
  return redis.error_reply('INVALID_RECORD bad argument count')
end
local lso = tonumber(meta[2])

-- Idempotent producer: a resent batch (same epoch and sequence range as one of the
-- last five) gets its original offset back and writes nothing.
local pid = ARGV[5]
local pstate
if pid ~= '-1' then
  local raw = redis.call('HGET', KEYS[4], pid)
  local epoch = tonumber(ARGV[6])
  local seq = tonumber(ARGV[7])
  if raw then
    pstate = cjson.decode(raw)
    if pstate.e == epoch then
      for _, b in ipairs(pstate.b) do
        if b[1] == seq and b[2] == seq + n - 1 then
          return {b[3], lso, -1, 1}
        end
      end
    else
      pstate = nil
    end
  end
  if not pstate then
    pstate = {e = epoch, b = {}}
  end
end

local append_time = -1
if ARGV[2] == '1' then
  local now = redis.call('TIME')
  append_time = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

local log = KEYS[1]
local first, last
for i = 9, 8 + 5 * n, 5 do
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
  redis.call('HSET', KEYS[4], pid, cjson.encode(pstate))
end

redis.call('PUBLISH', ARGV[8], hw)
return {base, lso, append_time, 0}
