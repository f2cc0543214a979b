-- cleaner.lua: the compaction lease of one partition (one sidecar compacts it at a
-- time) and the compactor's bookkeeping in the partition's meta hash.
--
-- KEYS[1] lease  skiff:{t/p}:cleaner (string: holder token, PX expiry)
-- KEYS[2] meta   skiff:{t/p}:meta
-- KEYS[3] log    skiff:{t/p}:log        (write, swap: `batch` topics)
-- KEYS[4] clean  skiff:{t/p}:log.clean  (the cleaned log being written)
-- ARGV[1] 'acquire' | 'renew' | 'done' | 'release' | 'write' | 'swap'
-- ARGV[2] token   ARGV[3] lease ms
-- done: ARGV[4] cleaned-up-to offset (only grows), ARGV[5..] meta field, value pairs
-- write: ARGV[4..] entry ID, batch pairs appended to the clean stream (lease renewed);
--   ARGV[4] '' deletes the clean stream first (a pass starts)
-- swap: ARGV[4] the last log entry ID the clean stream has, ARGV[5] most entries to
--   copy, then as done from ARGV[6] (cleaned-up-to, field, value pairs). The entries
--   appended to the log after ARGV[4] are copied, the clean stream takes the log's last
--   ID and replaces it (RENAME), all in this one script: readers see the log before or
--   after compaction, never between. The log's consumer groups (queue groups on
--   `batch` topics: only their last-delivered id, the cursor, is used) are made again
--   on the new log at the same last-delivered ids. Reply -1: more than ARGV[5] entries
--   to copy (nothing done; the caller copies some with write and asks again); -2: a
--   consumer group of the log has pending entries (a plain Redis reader's), which a
--   RENAME would lose: the clean stream is dropped.
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

local function done(at)
  local cleaned = tonumber(redis.call('HGET', KEYS[2], 'cleaned') or '0')
  local upto = tonumber(ARGV[at])
  if upto < cleaned then
    upto = cleaned
  end
  redis.call('HSET', KEYS[2], 'cleaned', upto)
  for i = at + 1, #ARGV, 2 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end

if redis.call('EXISTS', KEYS[2]) == 0 then
  if KEYS[4] then
    redis.call('DEL', KEYS[4])
  end
  if op == 'done' or op == 'write' or op == 'swap' then
    return 0
  end
end

if op == 'done' then
  done(4)
  return 1
end

if op == 'write' then
  local first = 4
  if ARGV[4] == '' then
    redis.call('DEL', KEYS[4])
    first = 5
  end
  for i = first, #ARGV, 2 do
    redis.call('XADD', KEYS[4], ARGV[i], 'b', ARGV[i + 1])
  end
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
  return 1
end

if op == 'swap' then
  -- Consumer groups live in the stream object: note them to make them again after
  -- the RENAME. Skiff's queue groups on `batch` topics never read the stream, so their
  -- pending lists are empty; one that is not (a plain Redis reader) stops the swap.
  local groups = {}
  if redis.call('EXISTS', KEYS[3]) == 1 then
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[3])) do
      local info = {}
      for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
      if tonumber(info['pending']) > 0 then
        redis.call('DEL', KEYS[4])
        return -2
      end
      table.insert(groups, {info['name'], info['last-delivered-id']})
    end
  end
  local limit = tonumber(ARGV[5])
  local tail = redis.call('XRANGE', KEYS[3], '(' .. ARGV[4], '+', 'COUNT', limit + 1)
  if #tail > limit then
    return -1
  end
  for _, e in ipairs(tail) do
    redis.call('XADD', KEYS[4], e[1], unpack(e[2]))
  end
  local hw = redis.call('HGET', KEYS[2], 'hw')
  if redis.call('EXISTS', KEYS[4]) == 1 then
    -- The log's last ID, so an append finds the stream as it left it.
    redis.call('XSETID', KEYS[4], '0-' .. hw)
    redis.call('RENAME', KEYS[4], KEYS[3])
  else
    redis.call('DEL', KEYS[3])  -- nothing kept and nothing appended since
  end
  for i, g in ipairs(groups) do
    redis.call('XGROUP', 'CREATE', KEYS[3], g[1], g[2], 'MKSTREAM')
    if i == 1 then
      -- A log MKSTREAM made empty gets the last ID too (after the RENAME: unchanged).
      redis.call('XSETID', KEYS[3], '0-' .. hw)
    end
  end
  done(6)
  return 1
end

redis.call('DEL', KEYS[1])  -- release
return 1
