-- Compare-and-set of one resource's dynamic broker configs (IncrementalAlterConfigs,
-- AlterConfigs on a BROKER resource): the entry is replaced only if it still holds what
-- the caller read, so two sidecars changing one resource at once never lose an update;
-- the loser reads the entry again and re-applies its change.
-- KEYS[1] skiff:broker_configs
-- ARGV[1] the resource ('' the cluster default, else a node id), ARGV[2] the entry as
--         read ('' when there was none), ARGV[3] the new entry ('' removes it)
-- ARGV[4] the channel to PUBLISH the resource on once replaced ('' for none), so every
--         sidecar reads the configs again (keys.BROKER_CONFIGS_CHANNEL)
-- Returns 1 when replaced, 0 when the entry changed since it was read.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current == false then
  current = ''
end
if current ~= ARGV[2] then
  return 0
end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
if ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], ARGV[1])
end
return 1
