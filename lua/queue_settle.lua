-- queue_settle.lua: finish, release or renew records held under a lease.
--
-- KEYS[1] log stream skiff:{t/p}:log    KEYS[2] due hint (lua/queue_acquire.lua)
-- ARGV[1] consumer group (q:<group>)   ARGV[2] holder   ARGV[3] lock ms
-- ARGV[4] action: 'accept' (XACK), 'release' (available again at once, delivery count
--         unchanged), 'renew' (lease starts again), 'reject' (XACK), 'dead' (move to
--         the dead-letter holder ARGV[5]; the caller copies the record to the
--         dead-letter topic and then sends 'finish' as that holder),
--         'finish' (XACK entries still held by ARGV[2], whatever their lease),
--         'unacquire' (as release, and the delivery does not count)
-- ARGV[5] dead-letter holder           ARGV[6] wake-up channel (PUBLISHed on release)
-- ARGV[7] due hint lifetime ms          ARGV[8..] offsets
-- Reply: {now ms, code per offset...}: 0 done, 1 not pending (never acquired, finished
-- or reset), 2 held by another holder, 3 lease expired. Nothing changes for an
-- offset whose code is not 0. Error NOGROUP when the consumer group does not exist.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local log, grp, holder, action = KEYS[1], ARGV[1], ARGV[2], ARGV[4]
local lock = tonumber(ARGV[3])
local out = {now}
local released = false
local leased = false
for i = 8, #ARGV do
  local id = '0-' .. (tonumber(ARGV[i]) + 1)
  local p = redis.pcall('XPENDING', log, grp, id, id, 1)
  if type(p) == 'table' and p.err then
    return redis.error_reply(p.err)
  end
  local code = 0
  if #p == 0 then
    code = 1
  elseif p[1][2] ~= holder then
    code = 2
  elseif action ~= 'finish' and tonumber(p[1][3]) >= lock then
    code = 3
  end
  if code == 0 then
    local count = tonumber(p[1][4])
    if action == 'accept' or action == 'reject' or action == 'finish' then
      redis.call('XACK', log, grp, id)
    elseif action == 'release' then
      -- IDLE close to the epoch: the entry counts as expired for every lock duration.
      redis.call('XCLAIM', log, grp, '~released', 0, id, 'IDLE', now - 1000,
        'RETRYCOUNT', count, 'JUSTID')
      released = true
    elseif action == 'unacquire' then
      -- Handed back unseen (over the caller's byte budget): this delivery does not count.
      redis.call('XCLAIM', log, grp, '~released', 0, id, 'IDLE', now - 1000,
        'RETRYCOUNT', math.max(count - 1, 0), 'JUSTID')
      released = true
    elseif action == 'renew' then
      redis.call('XCLAIM', log, grp, holder, 0, id, 'RETRYCOUNT', count, 'JUSTID')
      leased = true
    elseif action == 'dead' then
      -- The count carries a rejected mark (+1000000) until the copy is made: should the
      -- copy fail, whoever re-acquires the entry dead-letters it as rejected.
      redis.call('XCLAIM', log, grp, ARGV[5], 0, id, 'RETRYCOUNT', count + 1000000, 'JUSTID')
      leased = true
    end
  end
  table.insert(out, code)
end
if released then
  redis.call('ZADD', KEYS[2], 0, 0)  -- available now: the next acquire scans
end
if leased then
  redis.call('ZADD', KEYS[2], now, now)  -- leases started now
end
if released or leased then
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
end
if released and ARGV[6] ~= '' then
  -- Long polls waiting on this partition look again (same channel as appends).
  redis.call('PUBLISH', ARGV[6], 'released')
end
return out
