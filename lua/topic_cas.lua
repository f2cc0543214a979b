-- Compare-and-set of one topic's registry entry in skiff:topics (AlterConfigs,
-- IncrementalAlterConfigs, CreatePartitions): the entry is replaced only if it still
-- holds what the caller read, so two sidecars changing one topic at once never lose an
-- update; the loser reads the entry again and re-applies its change.
-- KEYS[1] skiff:topics
-- ARGV[1] topic name, ARGV[2] the entry as read, ARGV[3] the new entry
-- ARGV[4] the registry channel ('' for none): the name is PUBLISHed there once replaced,
--         so every sidecar's registry cache drops the old entry (keys.TOPICS_CHANNEL)
-- Returns 1 when replaced, 0 when the entry changed (or is gone) since it was read.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], ARGV[1])
end
return 1
