-- group_write.lua: every write to a consumer group's state, fenced by its lease.
--
-- KEYS[1] skiff:{g/<group>}:lease    KEYS[2] skiff:{g/<group>}:group (JSON metadata)
-- KEYS[3] skiff:{g/<group>}:offsets  hash: "<topic>/<partition>" -> offset record
-- ARGV[1] the writer's lease token   ARGV[2] op
--   store   ARGV[3] group metadata JSON
--   commit  ARGV[3..] field, value pairs
--   forget  ARGV[3..] offset fields to delete
--   delete  the group, its offsets and its lease
--   release the lease
--   share   a share group's membership: KEYS[4] skiff:{g/<group>}:share (hash),
--           ARGV[3] group epoch, ARGV[4] n, ARGV[5..4+n] members gone, then
--           "m:<member id>", member JSON pairs
-- A sidecar whose lease was taken over (it was paused or cut off from Redis past
-- its registration's TTL) gets 0 and writes nothing; the new coordinator's state
-- stands. Reply: 1 written, 0 fenced.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local op = ARGV[2]
if op == 'store' then
  redis.call('SET', KEYS[2], ARGV[3])
elseif op == 'commit' then
  redis.call('HSET', KEYS[3], unpack(ARGV, 3))
elseif op == 'forget' then
  redis.call('HDEL', KEYS[3], unpack(ARGV, 3))
elseif op == 'delete' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
elseif op == 'release' then
  redis.call('DEL', KEYS[1])
elseif op == 'share' then
  local n = tonumber(ARGV[4])
  redis.call('HSET', KEYS[4], 'epoch', ARGV[3])
  for i = 5, 4 + n do
    redis.call('HDEL', KEYS[4], 'm:' .. ARGV[i])
  end
  if #ARGV > 4 + n then
    redis.call('HSET', KEYS[4], unpack(ARGV, 5 + n))
  end
else
  return redis.error_reply('ERR unknown op ' .. tostring(op))
end
return 1
