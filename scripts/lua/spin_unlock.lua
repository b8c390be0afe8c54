-- Release one hold of a spin lock, idempotently (Redisson RSpinLock's unlock, >= 3.25 latch).
-- Like unlock.lua, but a spin lock publishes nothing: its waiters poll.
-- KEYS[1]  lock key
-- KEYS[2]  unlock latch, redisson_unlock_latch:{<key>}:<request-id>
-- ARGV[1]  lease in ms, the TTL set when holds remain
-- ARGV[2]  owner field
-- ARGV[3]  latch lifetime in ms
-- Reply:   nil the owner holds no hold (nothing changed); 0 one hold released, others remain;
--          1 last hold released, key deleted. A re-sent request replies the first answer.
local latched = redis.call('get', KEYS[2])
if latched then
    return tonumber(latched)
end
local holds = redis.call('hget', KEYS[1], ARGV[2])
if not holds then
    return nil
end
if tonumber(holds) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], 0, 'px', ARGV[3])
    return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[2], 1, 'px', ARGV[3])
return 1
