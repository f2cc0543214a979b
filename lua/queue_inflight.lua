-- queue_inflight.lua: a queue group's per-record state on a `batch` topic, where a
-- stream entry is a whole stored batch so Redis's per-entry pending list cannot be the
-- lease table (docs/architecture.md, "Queue groups on batch topics").
--
-- State per group and partition (all in the partition's slot):
--   consumer group q:<group> on the log: exists while the group reads the partition
--     (dies with the stream, so a recreated topic starts afresh); its last-delivered
--     id 0-<next> is the cursor: every offset below next was handed out once
--   KEYS[3] lease zset skiff:{t/p}:q:<group>:lease  member offset, score lease start ms
--     (0: released, so available at once for every lock duration)
--   KEYS[4] record hash skiff:{t/p}:q:<group>:rec   field offset, value
--     "<delivery count>:<holder>" (released ones: holder '~released')
-- Both hold only records handed out and not finished, as the pending entries list does
-- on a record topic; the same rules apply (lua/queue_acquire.lua, queue_settle.lua,
-- queue_state.lua), with lease start scores in place of idle times. Record bodies never
-- pass through Lua: the caller reads the batches.
--
-- KEYS[1] log stream   KEYS[2] meta hash   ARGV[1] op   ARGV[2] consumer group (q:<group>)
--
-- op 'init':    ARGV[3] start (earliest|latest|offset) ARGV[4] offset ARGV[5] create|reset
--               reply: the cursor, -1 when 'create' found the group
-- op 'reclaim': ARGV[3] holder ARGV[4] lock ms ARGV[5] delivery limit ARGV[6] max records
--               ARGV[7] dead-letter holder
--               reply {now, offset, count, kind, ...} as lua/queue_acquire.lua
-- op 'claim':   ARGV[3] holder ARGV[4] max records ARGV[5] cap on records in flight
--               ARGV[6] '1': read_committed (share.isolation.level), '0': uncommitted
--               [ARGV[7] skip to ARGV[8] seen cursor]
--               reply {now, lso, first, end, last abort}: offsets first..end-1 leased
--               to holder, no more than leave the records in the lease zset at most
--               ARGV[5] (group.share.partition.max.record.locks; lua/queue_reserve.lua
--               on `record` topics), and read_committed none at or past the last
--               stable offset (meta 'ls'). Last abort: meta 'ab' (-1: none), the
--               offset of the partition's last ABORT marker; the caller filters the
--               claimed records of aborted transactions only when it is >= first.
--               With ARGV[7]: the caller read the log and found no record from ARGV[8]
--               (the cursor then) to ARGV[7] (compacted away); while the cursor is still
--               ARGV[8] the claim starts at ARGV[7], as XREADGROUP passes deleted entries
-- op 'settle':  ARGV[3] holder ARGV[4] lock ms ARGV[5] action ARGV[6] dead-letter holder
--               ARGV[7] wake-up channel ARGV[8..] offsets; reply as lua/queue_settle.lua
-- op 'state':   ARGV[3] lock ms ARGV[4] records to look at; reply as lua/queue_state.lua
-- op 'held':    ARGV[3] holder ARGV[4] max ARGV[5] after; reply: up to max offsets above
--               `after` leased to holder (ascending)
-- Error NOGROUP (reclaim, claim) when the group does not read the partition; settle
-- and held then find nothing pending.
local REJECTED = 1000000  -- count mark of rejected records (lua/queue_settle.lua)
local log, meta, lease, rec = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, grp = ARGV[1], ARGV[2]

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The cursor (next offset never handed out), nil without the consumer group.
local function cursor()
  local groups = redis.pcall('XINFO', 'GROUPS', log)
  if type(groups) == 'table' and groups.err then
    return nil
  end
  for _, g in ipairs(groups) do
    local name, ld
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then ld = g[i + 1] end
    end
    if name == grp then
      return tonumber(string.sub(ld, 3))
    end
  end
  return nil
end

local function parse(v)
  local sep = string.find(v, ':', 1, true)
  return tonumber(string.sub(v, 1, sep - 1)), string.sub(v, sep + 1)
end

local function lso_of()
  return tonumber(redis.call('HGET', meta, 'lso') or '0')
end

if op == 'init' then
  local m = redis.call('HMGET', meta, 'hw', 'lso')
  if not m[1] then
    return redis.error_reply('UNKNOWN_TOPIC_OR_PARTITION')
  end
  local hw, lso = tonumber(m[1]), tonumber(m[2] or '0')
  local pos = hw
  if ARGV[3] == 'earliest' then
    pos = lso
  elseif ARGV[3] == 'offset' then
    pos = math.max(lso, math.min(hw, tonumber(ARGV[4])))
  end
  if ARGV[5] == 'reset' then
    redis.pcall('XGROUP', 'DESTROY', log, grp)
  end
  local ok = redis.pcall('XGROUP', 'CREATE', log, grp, '0-' .. pos, 'MKSTREAM')
  if type(ok) == 'table' and ok.err then
    if string.find(ok.err, 'BUSYGROUP', 1, true) then
      return -1
    end
    return redis.error_reply(ok.err)
  end
  redis.call('DEL', lease, rec)  -- a new group: nothing of an older one is in flight
  return pos
end

if op == 'reclaim' then
  local now = clock()
  local holder, lock = ARGV[3], tonumber(ARGV[4])
  local limit, max = tonumber(ARGV[5]), tonumber(ARGV[6])
  -- O(log n) when nothing is available: no due hint needed.
  local avail = redis.call('ZRANGEBYSCORE', lease, '-inf', now - lock)
  if #avail == 0 then
    if not cursor() then
      return redis.error_reply('NOGROUP no queue group on this partition')
    end
    return {now}
  end
  -- Lowest offsets first, as XPENDING hands them out on a record topic.
  local offs = {}
  for i, o in ipairs(avail) do offs[i] = tonumber(o) end
  table.sort(offs)
  local lso = lso_of()
  local out = {now}
  for i = 1, math.min(#offs, max) do
    local offset = offs[i]
    local count = parse(redis.call('HGET', rec, offset) or '0:~')
    if offset < lso then
      redis.call('ZREM', lease, offset); redis.call('HDEL', rec, offset)
    elseif count >= REJECTED then
      redis.call('ZADD', lease, now, offset); redis.call('HSET', rec, offset, count .. ':' .. ARGV[7])
      table.insert(out, offset); table.insert(out, count - REJECTED); table.insert(out, 3)
    elseif count >= limit then
      redis.call('ZADD', lease, now, offset); redis.call('HSET', rec, offset, count .. ':' .. ARGV[7])
      table.insert(out, offset); table.insert(out, count); table.insert(out, 2)
    else
      redis.call('ZADD', lease, now, offset)
      redis.call('HSET', rec, offset, (count + 1) .. ':' .. holder)
      table.insert(out, offset); table.insert(out, count + 1); table.insert(out, 1)
    end
  end
  return out
end

if op == 'claim' then
  local now = clock()
  local pos = cursor()
  if not pos then
    return redis.error_reply('NOGROUP no queue group on this partition')
  end
  local m = redis.call('HMGET', meta, 'hw', 'lso', 'ls', 'ab')
  local hw, lso = tonumber(m[1] or '0'), tonumber(m[2] or '0')
  if ARGV[6] == '1' and m[3] then
    hw = math.min(hw, tonumber(m[3]))
  end
  if ARGV[7] and pos == tonumber(ARGV[8]) then
    pos = math.min(math.max(pos, tonumber(ARGV[7])), hw)
  end
  pos = math.max(pos, lso)
  local room = tonumber(ARGV[5]) - redis.call('ZCARD', lease)
  local last = math.min(hw, pos + math.max(0, math.min(tonumber(ARGV[4]), room)))
  if last > pos then
    redis.call('XGROUP', 'SETID', log, grp, '0-' .. last)
    local value = '1:' .. ARGV[3]
    -- Chunks keep the argument count of one call small.
    for from = pos, last - 1, 500 do
      local z, h = {}, {}
      for o = from, math.min(from + 499, last - 1) do
        table.insert(z, now); table.insert(z, o)
        table.insert(h, o); table.insert(h, value)
      end
      redis.call('ZADD', lease, unpack(z))
      redis.call('HSET', rec, unpack(h))
    end
  end
  return {now, lso, pos, last, tonumber(m[4] or '-1')}
end

if op == 'settle' then
  local now = clock()
  local holder, lock, action = ARGV[3], tonumber(ARGV[4]), ARGV[5]
  local out = {now}
  if not cursor() then
    -- No consumer group (the topic was deleted and made again): nothing is pending,
    -- as on a record topic; keys a deleted topic left behind are never used.
    for _ = 8, #ARGV do table.insert(out, 1) end
    return out
  end
  local released = false
  for i = 8, #ARGV do
    local offset = ARGV[i]
    local v = redis.call('HGET', rec, offset)
    local code = 0
    local count, h
    if not v then
      code = 1
    else
      count, h = parse(v)
      if h ~= holder then
        code = 2
      elseif action ~= 'finish' and now - tonumber(redis.call('ZSCORE', lease, offset)) >= lock then
        code = 3
      end
    end
    if code == 0 then
      if action == 'accept' or action == 'reject' or action == 'finish' then
        redis.call('ZREM', lease, offset); redis.call('HDEL', rec, offset)
      elseif action == 'release' then
        redis.call('ZADD', lease, 0, offset); redis.call('HSET', rec, offset, count .. ':~released')
        released = true
      elseif action == 'unacquire' then
        redis.call('ZADD', lease, 0, offset)
        redis.call('HSET', rec, offset, math.max(count - 1, 0) .. ':~released')
        released = true
      elseif action == 'renew' then
        redis.call('ZADD', lease, now, offset)
      elseif action == 'dead' then
        redis.call('ZADD', lease, now, offset)
        redis.call('HSET', rec, offset, (count + REJECTED) .. ':' .. ARGV[6])
      end
    end
    table.insert(out, code)
  end
  if released and ARGV[7] ~= '' then
    redis.call('PUBLISH', ARGV[7], 'released')
  end
  return out
end

if op == 'held' then
  local out = {}
  if not cursor() then
    return out
  end
  local all = redis.call('HGETALL', rec)
  for i = 1, #all, 2 do
    local _, h = parse(all[i + 1])
    local o = tonumber(all[i])
    if h == ARGV[3] and o > tonumber(ARGV[5]) then table.insert(out, o) end
  end
  table.sort(out)
  while #out > tonumber(ARGV[4]) do table.remove(out) end
  return out
end

if op == 'state' then
  local m = redis.call('HMGET', meta, 'hw', 'lso')
  if not m[1] then
    return redis.error_reply('UNKNOWN_TOPIC_OR_PARTITION')
  end
  local hw, lso = tonumber(m[1]), tonumber(m[2] or '0')
  local nextnew = cursor()
  if not nextnew then
    return {0}
  end
  local lock, scan = tonumber(ARGV[3]), tonumber(ARGV[4])
  local all = redis.call('HGETALL', rec)
  local pending = #all / 2
  local lowest = nextnew
  local offs, values, holders = {}, {}, {}
  for i = 1, #all, 2 do
    local o = tonumber(all[i])
    if o < lowest then lowest = o end
    if scan > 0 then
      table.insert(offs, o)
      values[o] = all[i + 1]
      local _, h = parse(all[i + 1])
      holders[h] = (holders[h] or 0) + 1
    end
  end
  lowest = math.max(lowest, lso)
  local scanned, available, oldest = 0, 0, 0
  local hist = {}
  local now = clock()
  table.sort(offs)
  for i = 1, math.min(#offs, scan) do
    local o = offs[i]
    local count, h = parse(values[o])
    count = count % REJECTED
    scanned = scanned + 1
    hist[count] = (hist[count] or 0) + 1
    local idle = now - tonumber(redis.call('ZSCORE', lease, o))
    if idle >= lock then
      available = available + 1
    end
    if h ~= '~released' and idle > oldest then
      oldest = idle
    end
  end
  local out = {1, hw, lso, nextnew, pending, lowest, scanned, available, oldest}
  local pairs_ = {}
  for count, n in pairs(hist) do
    table.insert(pairs_, count); table.insert(pairs_, n)
  end
  table.insert(out, #pairs_ / 2)
  for _, v in ipairs(pairs_) do table.insert(out, v) end
  for h, n in pairs(holders) do table.insert(out, h); table.insert(out, n) end
  return out
end

return redis.error_reply('ERR unknown op ' .. tostring(op))
