-- Add or remove ACL bindings, bump the version counter and announce it, atomically.
-- KEYS[1]: hash of bindings (field: the binding's JSON, value "1"); KEYS[2]: version
-- counter (both under the hash tag {acls}: one slot).
-- ARGV[1]: 'add' or 'remove'; ARGV[2]: the change channel; ARGV[3..]: bindings.
-- Returns {version, {1 or 0 per binding: added / removed by this call}}.
local changed = 0
local done = {}
local command = ARGV[1] == 'add' and 'HSET' or 'HDEL'
for i = 3, #ARGV do
  local n
  if command == 'HSET' then
    n = redis.call('HSET', KEYS[1], ARGV[i], '1')
  else
    n = redis.call('HDEL', KEYS[1], ARGV[i])
  end
  done[#done + 1] = n
  changed = changed + n
end
local version = tonumber(redis.call('GET', KEYS[2]) or '0')
if changed > 0 then
  version = redis.call('INCR', KEYS[2])
  redis.call('PUBLISH', ARGV[2], version)
end
return {version, done}
