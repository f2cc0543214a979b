-- txn_offsets.lua: a transaction's offset commits for one group (TxnOffsetCommit,
-- then EndTxn; docs/transactions.md).
--
-- KEYS[1] skiff:{g/<group>}:txnoffsets:<pid>  hash: pending "<topic>/<partition>" ->
--         offset record (storage/group_store.py CommittedOffset)
-- KEYS[2] skiff:{g/<group>}:offsets           the group's committed offsets
-- KEYS[3] skiff:{g/<group>}:txnpending        set of producer ids with pending offsets
-- ARGV[1] op: 'stage' (ARGV[4..]: field, value pairs, kept ARGV[3] ms), 'C' (commit:
--         the pending offsets become the group's) or 'A' (abort: they are dropped)
-- ARGV[2] the producer id
-- Reply: the number of offsets staged, committed or dropped.

local op = ARGV[1]
if op == 'stage' then
  redis.call('HSET', KEYS[1], unpack(ARGV, 4))
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('SADD', KEYS[3], ARGV[2])
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  return (#ARGV - 3) / 2
end
local pending = redis.call('HGETALL', KEYS[1])
if op == 'C' then
  -- unpack() takes at most ~8000 values: in steps of 2000
  for i = 1, #pending, 2000 do
    redis.call('HSET', KEYS[2], unpack(pending, i, math.min(i + 1999, #pending)))
  end
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[2])
return #pending / 2
