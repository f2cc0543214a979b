-- group_lease.lua: claim the coordinator lease of one consumer group.
--
-- KEYS[1] skiff:{g/<group>}:lease  string: "<node id>:<incarnation>" of the coordinator
-- ARGV[1] the claiming sidecar's token
-- ARGV[2] the holder the caller saw and found dead ("" if there was none)
--
-- A lease has no TTL: it is valid while its holder's broker registration lives
-- (brokers.lua). The caller checks that the holder is dead; this script makes the
-- takeover a compare-and-set, so two sidecars taking over agree on one winner.
-- Reply: 1 claimed (or already ours), else the current holder.

local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then return 1 end
if (not cur and ARGV[2] == '') or cur == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return cur
