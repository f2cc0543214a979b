-- txn_deadline.lua: drop a transactional id from the deadlines (skiff:txn_deadlines)
-- only if its deadline is still the one the caller saw: a transaction started since
-- filed a new one, which must stay.
--
-- KEYS[1] skiff:txn_deadlines   ARGV[1] transactional id   ARGV[2] the deadline seen
-- Reply: 1 removed, 0 kept.

if redis.call('ZSCORE', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
