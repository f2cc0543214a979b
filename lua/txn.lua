-- txn.lua: a transactional id's transaction state (Kafka's TransactionCoordinator,
-- its state in Redis; docs/transactions.md).
--
-- KEYS[1] skiff:{txn/<id>}:producer    hash {pid, epoch, tok, state, timeout, start, seq}
-- KEYS[2] skiff:{txn/<id>}:partitions  set "<topic>/<partition>" in the transaction
-- KEYS[3] skiff:{txn/<id>}:groups      set of group ids whose offsets it commits
-- ARGV[1] op, ARGV[2] now (ms), ARGV[3] transactional.id.expiration.ms, then per op:
--   add      ARGV[4] pid, ARGV[5] epoch, ARGV[6] 'p' (partitions) or 'g' (groups),
--            ARGV[7..] members. Starts the transaction if none is open.
--            Reply {1 if it started one else 0, start + timeout (the deadline)}
--   end      ARGV[4] pid, ARGV[5] epoch, ARGV[6] '1' commit or '0' abort: decides.
--            ARGV[7] '2': transaction version 2 (EndTxn v5, KIP-890): every end
--            bumps the epoch, markers carry the bumped one; at epoch 32766 the
--            transaction ends at 32767 and the id moves to ARGV[8] (a fresh producer
--            id), epoch 0, when it completes. Retries (request epoch one below the
--            stored one, or the old id at 32766 after such a move) get the same
--            answer; an abort of no open transaction bumps the epoch alone. Reply as
--            below, or {'', pid, epoch}: nothing to complete, answer (pid, epoch).
--   expire   ARGV[4] '1' abort only a transaction past its deadline, '0' any open
--            one (InitProducerId of a new instance): the coordinator aborts with the
--            epoch bumped, so the producer that opened it is fenced.
--            end and expire reply {decision, seq, epoch, pid, next pid (-1: the same),
--            n, partitions.., groups..}
--            (decision 'C' commit, 'A' abort, '' nothing to do, then for expire of an
--            open transaction not yet due its deadline); a transaction already
--            decided (a coordinator died while completing it) is answered the same
--            way, so whoever asks next completes it.
--   done     ARGV[4] seq, ARGV[5] decision: the markers and offsets of transaction
--            seq are written; it is complete.
-- States: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort.
-- Fields for version 2's producer id moves: npid (the next id while the transaction
-- that exhausted the epoch completes), ppid (the id before the last move).
-- Errors: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS,
-- INVALID_TXN_STATE.

local op = ARGV[1]
local now = tonumber(ARGV[2])
local cur = redis.call('HMGET', KEYS[1], 'pid', 'epoch', 'state', 'timeout', 'start', 'seq')
local state = cur[3] or 'Empty'

local function keep()
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], ARGV[3])
  end
end

local MAX_EPOCH = 32767

local function decided(decision)
  local npid = tonumber(redis.call('HGET', KEYS[1], 'npid') or '-1')
  local reply = {decision, tonumber(cur[6] or '0'), tonumber(cur[2]), tonumber(cur[1]), npid}
  local parts = redis.call('SMEMBERS', KEYS[2])
  table.insert(reply, #parts)
  for _, p in ipairs(parts) do table.insert(reply, p) end
  for _, g in ipairs(redis.call('SMEMBERS', KEYS[3])) do table.insert(reply, g) end
  return reply
end

local function prepared()
  if state == 'PrepareCommit' then return 'C' end
  if state == 'PrepareAbort' then return 'A' end
  return nil
end

local function check_producer(pid, epoch)
  if not cur[1] or tonumber(cur[1]) ~= tonumber(pid) then
    return redis.error_reply('INVALID_PRODUCER_ID_MAPPING producer ' .. pid ..
      ' does not hold this transactional id')
  end
  if tonumber(epoch) ~= tonumber(cur[2]) then
    return redis.error_reply('PRODUCER_FENCED producer ' .. pid .. ' epoch ' .. epoch ..
      ' is not the current epoch ' .. cur[2])
  end
  return nil
end

if op == 'add' then
  local bad = check_producer(ARGV[4], ARGV[5])
  if bad then return bad end
  if prepared() then
    return redis.error_reply('CONCURRENT_TRANSACTIONS the previous transaction is completing')
  end
  local started = 0
  local start = tonumber(cur[5] or '0')
  if state ~= 'Ongoing' then
    started, start = 1, now
    redis.call('HSET', KEYS[1], 'state', 'Ongoing', 'start', now, 'seq', tonumber(cur[6] or '0') + 1)
  end
  local set = ARGV[6] == 'p' and KEYS[2] or KEYS[3]
  if #ARGV >= 7 then
    redis.call('SADD', set, unpack(ARGV, 7))
  end
  keep()
  return {started, start + tonumber(cur[4] or '60000')}
elseif op == 'end' and ARGV[7] == '2' then
  -- Kafka's TransactionCoordinator.endTransaction with transaction version 2.
  local pid, epoch = tonumber(ARGV[4]), tonumber(ARGV[5])
  local want = ARGV[6] == '1' and 'C' or 'A'
  local spid, sepoch = tonumber(cur[1] or '-1'), tonumber(cur[2] or '-1')
  local ppid = tonumber(redis.call('HGET', KEYS[1], 'ppid') or '-2')
  local retry_moved = pid == ppid and epoch == MAX_EPOCH - 1 and sepoch == 0
  local retry_bumped = pid == spid and sepoch == epoch + 1
  if pid ~= spid and not retry_moved then
    return redis.error_reply('INVALID_PRODUCER_ID_MAPPING producer ' .. pid ..
      ' does not hold this transactional id')
  end
  local function fenced()
    return redis.error_reply('PRODUCER_FENCED producer ' .. pid .. ' epoch ' .. epoch ..
      ' is not the current epoch ' .. sepoch)
  end
  local function invalid()
    return redis.error_reply('INVALID_TXN_STATE cannot ' ..
      (want == 'C' and 'commit' or 'abort') .. ' in state ' .. state)
  end
  -- The epoch after this end: one more, or (exhausted) the last, with the next id.
  local function bump()
    if sepoch >= MAX_EPOCH - 1 then
      if ARGV[8] == nil or ARGV[8] == '' then
        return nil
      end
      return MAX_EPOCH, ARGV[8]
    end
    return sepoch + 1, nil
  end
  local p = prepared()
  if p then
    if not retry_bumped then return fenced() end
    if p ~= want then return invalid() end
    return decided(p)  -- a coordinator died completing it: complete it now
  end
  if state == 'Ongoing' then
    if epoch ~= sepoch then return fenced() end
    local e, npid = bump()
    if not e then return redis.error_reply('SKIFF_NEED_PID') end
    redis.call('HSET', KEYS[1], 'state', want == 'C' and 'PrepareCommit' or 'PrepareAbort',
      'epoch', e)
    if npid then redis.call('HSET', KEYS[1], 'npid', npid) end
    cur[2] = e
    keep()
    return decided(want)
  end
  local complete = state == 'CompleteCommit' and 'C' or (state == 'CompleteAbort' and 'A')
  if complete and (retry_bumped or retry_moved) then
    if complete == want then return {'', spid, sepoch} end
    -- A commit of a transaction the coordinator aborted (timeout, a new instance)
    -- fences the producer (KAFKA-20785).
    if complete == 'A' then return fenced() end
    return invalid()
  end
  if epoch ~= sepoch then return fenced() end
  if want == 'C' then return invalid() end
  -- An abort with no transaction open: the epoch moves on, nothing to write.
  local e, npid = bump()
  if not e then return redis.error_reply('SKIFF_NEED_PID') end
  if npid then
    redis.call('HSET', KEYS[1], 'pid', npid, 'epoch', 0, 'ppid', spid, 'state', 'CompleteAbort')
    keep()
    return {'', tonumber(npid), 0}
  end
  redis.call('HSET', KEYS[1], 'epoch', e, 'state', 'CompleteAbort')
  keep()
  return {'', spid, e}
elseif op == 'end' then
  local bad = check_producer(ARGV[4], ARGV[5])
  if bad then return bad end
  local want = ARGV[6] == '1' and 'C' or 'A'
  local p = prepared()
  if p then
    if p ~= want then
      return redis.error_reply('INVALID_TXN_STATE the transaction is already being ' ..
        (p == 'C' and 'committed' or 'aborted'))
    end
    return decided(p)
  end
  if state == 'Ongoing' then
    redis.call('HSET', KEYS[1], 'state', want == 'C' and 'PrepareCommit' or 'PrepareAbort')
    keep()
    return decided(want)
  end
  -- A retried EndTxn of the transaction just completed gets its answer again.
  if (state == 'CompleteCommit' and want == 'C') or (state == 'CompleteAbort' and want == 'A') then
    return {''}
  end
  return redis.error_reply('INVALID_TXN_STATE no transaction is open (state ' .. state .. ')')
elseif op == 'expire' then
  local p = prepared()
  if p then return decided(p) end
  if state ~= 'Ongoing' then return {''} end
  local deadline = tonumber(cur[5]) + tonumber(cur[4] or '60000')
  if ARGV[4] == '1' and now < deadline then
    return {'', deadline}
  end
  -- Kafka bumps the epoch when it aborts on its own (timeout, a new instance's init).
  local epoch = tonumber(cur[2]) + 1
  redis.call('HSET', KEYS[1], 'state', 'PrepareAbort', 'epoch', epoch)
  cur[2] = epoch
  keep()
  return decided('A')
elseif op == 'done' then
  local want = ARGV[5] == 'C' and 'PrepareCommit' or 'PrepareAbort'
  if state == want and tonumber(cur[6] or '0') == tonumber(ARGV[4]) then
    -- 'start' stays: DescribeTransactions reports the last transaction's, as Kafka does.
    redis.call('HSET', KEYS[1], 'state', ARGV[5] == 'C' and 'CompleteCommit' or 'CompleteAbort')
    redis.call('DEL', KEYS[2], KEYS[3])
    -- Version 2 exhausted the epoch: the id moves to the next producer id, epoch 0.
    local npid = redis.call('HGET', KEYS[1], 'npid')
    if npid then
      redis.call('HSET', KEYS[1], 'pid', npid, 'epoch', 0, 'ppid', cur[1])
      redis.call('HDEL', KEYS[1], 'npid')
    end
    return 1
  end
  return 0
end
return redis.error_reply('ERR unknown op ' .. tostring(op))
