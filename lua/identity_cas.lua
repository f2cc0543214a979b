-- identity_cas.lua: compare-and-set of the storage identity (skiff:identity, a JSON
-- string; sidecar/storage/identity.py). Used to create it, to mark the storage lost and
-- by `skiff storage reset --fresh`, so two sidecars (or a sidecar and the operator)
-- changing it at once never overwrite each other's decision.
-- KEYS[1] skiff:identity
-- ARGV[1] the value as read ('' when the key was missing), ARGV[2] the new value
-- Returns 1 when set, 0 when the key changed since it was read.
local current = redis.call('GET', KEYS[1])
if current == false then
  current = ''
end
if current ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
return 1
