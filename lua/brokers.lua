-- brokers.lua: the registry of live sidecars (like Kafka's ephemeral broker nodes).
--
-- KEYS[1] skiff:brokers  hash: node id -> cjson {host, port, inc, exp, at}
--   inc: the registration's incarnation token; exp: expiry, at: last registration or
--   renewal (DescribeQuorum's fetch time), both ms of Redis TIME.
-- ARGV[1] op: register | renew | leave | unregister | list
-- ARGV[2] node id (-1 for register: the lowest id no live sidecar holds)
-- ARGV[3] incarnation token   ARGV[4] host   ARGV[5] port   ARGV[6] ttl ms
-- ARGV[7] 1: take the node id even from a live registration (embedded Redis only)
-- ARGV[8] register: JSON of the sidecar's advertised listeners, {NAME: [host, port]}
--   (kept as a string in field `ls`: older sidecars' entries have none)
--
-- Expiry uses Redis TIME, so sidecar clocks never have to agree.
-- register -> {node id, now} or {-1, ms until the requested id expires}
-- renew    -> {1, now} while the registration is ours, {0, now} once it is lost
-- leave    -> {1} ; list -> {now, id1, json1, id2, json2, ...} of live sidecars
-- unregister (UnregisterBroker: any incarnation) -> {1, now} if a live registration
--   went, {0, now} if there was none (the sidecar's next renew fails: it registers again)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op = ARGV[1]

local function entry(id)
  local raw = redis.call('HGET', KEYS[1], id)
  if raw then return cjson.decode(raw) end
  return nil
end

local function write(id)
  redis.call('HSET', KEYS[1], id, cjson.encode({
    host = ARGV[4], port = tonumber(ARGV[5]), inc = ARGV[3], exp = now + tonumber(ARGV[6]),
    at = now, ls = ARGV[8]}))
end

if op == 'list' then
  local out = {now}
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    if cjson.decode(all[i + 1]).exp > now then
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    end
  end
  return out
elseif op == 'renew' then
  local e = entry(ARGV[2])
  if e and e.inc == ARGV[3] and e.exp > now then
    e.exp = now + tonumber(ARGV[6])
    e.at = now
    redis.call('HSET', KEYS[1], ARGV[2], cjson.encode(e))
    return {1, now}
  end
  return {0, now}
elseif op == 'leave' then
  local e = entry(ARGV[2])
  if e and e.inc == ARGV[3] then redis.call('HDEL', KEYS[1], ARGV[2]) end
  return {1}
elseif op == 'unregister' then
  local e = entry(ARGV[2])
  if e then redis.call('HDEL', KEYS[1], ARGV[2]) end
  if e and e.exp > now then return {1, now} end
  return {0, now}
elseif op == 'register' then
  local all = redis.call('HGETALL', KEYS[1])
  local live = {}
  for i = 1, #all, 2 do
    local e = cjson.decode(all[i + 1])
    if e.exp > now then
      live[all[i]] = e
    else
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
  local id = tonumber(ARGV[2])
  if id >= 0 then
    local e = live[tostring(id)]
    if e and e.inc ~= ARGV[3] and ARGV[7] ~= '1' then
      return {-1, e.exp - now}
    end
  else
    -- A resent register (lost reply) finds its own incarnation: keep that id.
    id = nil
    for k, e in pairs(live) do
      if e.inc == ARGV[3] then id = tonumber(k) end
    end
    if id == nil then
      id = 0
      while live[tostring(id)] do id = id + 1 end
    end
  end
  write(tostring(id))
  return {id, now}
end
return redis.error_reply('ERR unknown op ' .. tostring(op))
