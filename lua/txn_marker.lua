-- txn_marker.lua: write a transaction's COMMIT or ABORT marker (a control batch) to one
-- partition and close the producer's transaction there (Kafka's WriteTxnMarkers, run
-- by the coordinating sidecar; docs/transactions.md).
--
-- KEYS[1] log   KEYS[2] meta   KEYS[3] producers   KEYS[4] byte index
-- KEYS[5] open txns (pid -> first offset)   KEYS[6] aborted index (score: marker
-- offset, member "<pid> <first offset>")
-- ARGV[1] producer id   ARGV[2] producer epoch   ARGV[3] transaction number (seq; -1:
-- an operator's abort through WriteTxnMarkers, written whatever was marked before)
-- ARGV[4] 'C' commit or 'A' abort   ARGV[5] wake-up channel   ARGV[6] storage identity
-- ARGV[7] the control batch   ARGV[8] its size in bytes (byte accounting, as
-- lua/append.lua)   ARGV[9] storage format: 'b' (the batch is the entry) or 'r' (one
-- record entry, as lua/append.lua writes them: ARGV[10] key, ARGV[11] value (the control
-- record's), ARGV[12] flags, and p = "<producer id> <epoch>")
-- A marker is written once per transaction and partition: the producer's state keeps
-- the number of the last transaction marked (x), so a coordinator that completes a
-- transaction another one had started writes no second marker. A marker of an older
-- epoch than the partition knows is not written (that transaction was fenced).
-- Reply: {marker offset, or -1 when nothing was written}

local meta = redis.call('HMGET', KEYS[2], 'hw', 'lso', 'bytes', 'sid')
if not meta[1] then
  return redis.error_reply('UNKNOWN_TOPIC_OR_PARTITION')
end
if meta[4] and meta[4] ~= ARGV[6] then
  return redis.error_reply('KAFKA_STORAGE_ERROR partition created under storage identity ' ..
    meta[4] .. ', this sidecar serves ' .. ARGV[6])
end
local pid = ARGV[1]
local epoch = tonumber(ARGV[2])
local seq = tonumber(ARGV[3])
local raw = redis.call('HGET', KEYS[3], pid)
local pstate = raw and cjson.decode(raw) or {e = epoch, b = {}}
if (seq >= 0 and pstate.x and pstate.x >= seq) or pstate.e > epoch then
  return {-1}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local hw = tonumber(meta[1])
if ARGV[9] == 'r' then
  redis.call('XADD', KEYS[1], '0-' .. (hw + 1), 't', now, 'k', ARGV[10], 'v', ARGV[11],
    'h', '', 'f', ARGV[12], 'p', pid .. ' ' .. ARGV[2])
else
  redis.call('XADD', KEYS[1], '0-' .. (hw + 1), 'b', ARGV[7])
end
local before = tonumber(meta[3] or '0')
redis.call('ZADD', KEYS[4], before, hw)
redis.call('HSET', KEYS[2], 'hw', hw + 1, 'bytes', before + tonumber(ARGV[8]))

local first = redis.call('HGET', KEYS[5], pid)
local least
if first then
  redis.call('HDEL', KEYS[5], pid)
  if ARGV[4] == 'A' then
    redis.call('ZADD', KEYS[6], hw, pid .. ' ' .. first)
    redis.call('HSET', KEYS[2], 'ab', hw)
    -- Aborted transactions wholly below the log start concern no reader any more.
    redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', '(' .. meta[2])
  end
  -- The last stable offset moves to the next open transaction's start, or goes.
  for _, v in ipairs(redis.call('HVALS', KEYS[5])) do
    v = tonumber(v)
    if not least or v < least then least = v end
  end
  if least then
    redis.call('HSET', KEYS[2], 'ls', least)
  else
    redis.call('HDEL', KEYS[2], 'ls')
  end
else
  least = tonumber(redis.call('HGET', KEYS[2], 'ls'))
end

if epoch > pstate.e then
  pstate.b = {}  -- sequences start again in a new epoch
end
pstate.e = epoch
if seq >= 0 then
  pstate.x = seq
end
pstate.t = now
redis.call('HSET', KEYS[3], pid, cjson.encode(pstate))
-- "hw lso [ls]", as lua/append.lua publishes
redis.call('PUBLISH', ARGV[5], (hw + 1) .. ' ' .. meta[2] .. (least and (' ' .. least) or ''))
return {hw}
