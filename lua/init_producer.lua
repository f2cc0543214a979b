-- init_producer.lua: InitProducerId for a transactional id (Kafka's
-- TransactionCoordinator.handleInitProducerId; the transaction state is lua/txn.lua's).
--
-- KEYS[1] skiff:{txn/<transactional id>}:producer  hash {pid, epoch}
-- ARGV[1] a fresh producer id (used when the id needs a new one)
-- ARGV[2] producer id the client names (-1: none)   ARGV[3] its epoch (-1: none)
-- ARGV[4] transactional.id.expiration.ms             ARGV[5] the highest epoch
-- ARGV[6] request token: a resent request (the sidecar lost the reply) with the
--         token of the last run gets that run's answer, nothing is bumped again
-- ARGV[7] the producer's transaction.timeout.ms
-- An open transaction must be aborted first (txn.lua 'expire'): CONCURRENT_TRANSACTIONS.
-- Each init bumps the epoch, so the previous holder of the id is fenced: its
-- appends with the old epoch get INVALID_PRODUCER_EPOCH. A client naming a
-- producer id and epoch that are not the current ones is fenced itself.
-- Reply: {pid, epoch} or error PRODUCER_FENCED, CONCURRENT_TRANSACTIONS.

local cur = redis.call('HMGET', KEYS[1], 'pid', 'epoch', 'tok', 'state')
if cur[3] and cur[3] == ARGV[6] then
  return {tonumber(cur[1]), tonumber(cur[2])}
end
local state = cur[4] or 'Empty'
if state == 'Ongoing' or state == 'PrepareCommit' or state == 'PrepareAbort' then
  return redis.error_reply('CONCURRENT_TRANSACTIONS a transaction of this id is open')
end
local req_pid, req_epoch = tonumber(ARGV[2]), tonumber(ARGV[3])
local pid, epoch
if not cur[1] then
  pid, epoch = tonumber(ARGV[1]), 0
else
  pid, epoch = tonumber(cur[1]), tonumber(cur[2])
  if req_pid >= 0 and (req_pid ~= pid or req_epoch ~= epoch) then
    return redis.error_reply('PRODUCER_FENCED producer ' .. req_pid .. ' epoch ' ..
      req_epoch .. ' is not the current ' .. pid .. ' epoch ' .. epoch)
  end
  epoch = epoch + 1
  if epoch >= tonumber(ARGV[5]) then
    pid, epoch = tonumber(ARGV[1]), 0
  end
end
redis.call('HSET', KEYS[1], 'pid', pid, 'epoch', epoch, 'tok', ARGV[6], 'state', 'Empty',
  'timeout', ARGV[7] or '60000')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {pid, epoch}
