-- cleaner.lua: the compaction lease of one partition (one sidecar compacts it at a
-- time) and the compactor's bookkeeping in the partition's meta hash.
--
-- KEYS[1] lease  skiff:{t/p}:cleaner (string: holder token, PX expiry)
-- KEYS[2] meta   skiff:{t/p}:meta
-- ARGV[1] 'acquire' | 'renew' | 'done' | 'release'   ARGV[2] token   ARGV[3] lease ms
-- done: ARGV[4] cleaned-up-to offset (only grows), ARGV[5..] meta field, value pairs
-- Reply: 1 when the caller holds (held) the lease, else 0.

local op = ARGV[1]
local token = ARGV[2]
local holder = redis.call('GET', KEYS[1])

if op == 'acquire' then
  -- No lease for a partition that does not exist (a deleted topic leaves no key).
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return 0
  end
  if holder and holder ~= token then
    return 0
  end
  redis.call('SET', KEYS[1], token, 'PX', tonumber(ARGV[3]))
  return 1
end

if holder ~= token then
  return 0
end

if op == 'renew' then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
  return 1
end

if op == 'done' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return 0
  end
  local cleaned = tonumber(redis.call('HGET', KEYS[2], 'cleaned') or '0')
  local upto = tonumber(ARGV[4])
  if upto < cleaned then
    upto = cleaned
  end
  redis.call('HSET', KEYS[2], 'cleaned', upto)
  for i = 5, #ARGV, 2 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
  return 1
end

redis.call('DEL', KEYS[1])  -- release
return 1
