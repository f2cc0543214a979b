-- queue_state.lua: a queue group's state on one partition (read only).
--
-- KEYS[1] log stream skiff:{t/p}:log    KEYS[2] meta hash skiff:{t/p}:meta
-- ARGV[1] consumer group (q:<group>)    ARGV[2] lock ms
-- ARGV[3] pending entries to look at for the details (0: only the summary)
-- Reply: {0} without a consumer group; else {1, hw, lso, next new offset,
-- pending count, lowest unfinished offset, scanned, available (expired or released
-- among the scanned), oldest lease age ms (held entries), n, count, entries, ...
-- (n delivery-count histogram pairs), holder, entries, ...}
local meta = redis.call('HMGET', KEYS[2], 'hw', 'lso')
if not meta[1] then
  return redis.error_reply('UNKNOWN_TOPIC_OR_PARTITION')
end
local hw, lso = tonumber(meta[1]), tonumber(meta[2] or '0')
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[1])
if type(groups) == 'table' and groups.err then
  return {0}  -- no stream yet
end
local last
for _, g in ipairs(groups) do
  local name, ld
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then ld = g[i + 1] end
  end
  if name == ARGV[1] then last = ld end
end
if not last then
  return {0}
end
local nextnew = tonumber(string.sub(last, 3))
local summary = redis.call('XPENDING', KEYS[1], ARGV[1])
local pending = tonumber(summary[1])
local lowest = nextnew
if pending > 0 then
  lowest = math.min(lowest, tonumber(string.sub(summary[2], 3)) - 1)
end
lowest = math.max(lowest, lso)
local lock = tonumber(ARGV[2])
local scanned, available, oldest = 0, 0, 0
local hist, holders = {}, {}
if tonumber(ARGV[3]) > 0 and pending > 0 then
  local entries = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', ARGV[3])
  for _, p in ipairs(entries) do
    scanned = scanned + 1
    local idle, count = tonumber(p[3]), tonumber(p[4]) % 1000000  -- without the reject mark
    hist[count] = (hist[count] or 0) + 1
    if idle >= lock then
      available = available + 1
    end
    if p[2] ~= '~released' and idle > oldest then
      oldest = idle
    end
  end
  for _, c in ipairs(summary[4] or {}) do
    table.insert(holders, c[1]); table.insert(holders, tonumber(c[2]))
  end
end
local out = {1, hw, lso, nextnew, pending, lowest, scanned, available, oldest}
local pairs_ = {}
for count, n in pairs(hist) do
  table.insert(pairs_, count); table.insert(pairs_, n)
end
table.insert(out, #pairs_ / 2)
for _, v in ipairs(pairs_) do table.insert(out, v) end
for _, v in ipairs(holders) do table.insert(out, v) end
return out
