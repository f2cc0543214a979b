-- queue_init.lua: create (or reset) a queue group's Redis consumer group on a partition.
--
-- KEYS[1] log stream skiff:{t/p}:log    KEYS[2] meta hash skiff:{t/p}:meta
-- KEYS[3] the group's due hint on the partition (lua/queue_acquire.lua): dropped
-- ARGV[1] consumer group name (q:<group>)
-- ARGV[2] start: 'earliest' (log start), 'latest' (high watermark) or 'offset'
-- ARGV[3] the offset for 'offset' (clamped to [log start, high watermark])
-- ARGV[4] 'create' (leave an existing group alone) or 'reset' (drop its pending
--         entries and start again at the position)
-- Reply: the offset the group's next new record is read from; for 'create' of an
-- existing group -1. Error UNKNOWN_TOPIC_OR_PARTITION when the partition has no meta.
local meta = redis.call('HMGET', KEYS[2], 'hw', 'lso')
if not meta[1] then
  return redis.error_reply('UNKNOWN_TOPIC_OR_PARTITION')
end
local hw, lso = tonumber(meta[1]), tonumber(meta[2] or '0')
local pos = hw
if ARGV[2] == 'earliest' then
  pos = lso
elseif ARGV[2] == 'offset' then
  pos = math.max(lso, math.min(hw, tonumber(ARGV[3])))
end
if ARGV[4] == 'reset' then
  redis.pcall('XGROUP', 'DESTROY', KEYS[1], ARGV[1])
end
-- Stream IDs are 0-<offset+1>: "last delivered 0-pos" makes offset pos the next one.
local ok = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0-' .. pos, 'MKSTREAM')
if type(ok) == 'table' and ok.err then
  if string.find(ok.err, 'BUSYGROUP', 1, true) then
    return -1
  end
  return redis.error_reply(ok.err)
end
redis.call('DEL', KEYS[3])  -- a new consumer group: no hint of an older one applies
return pos
