-- Acquire (or re-enter) the write half of a read-write lock: Redisson RWriteLock's acquire,
-- made idempotent per request by an acquire latch.
-- KEYS[1]  lock key (see read_acquire.lua)
-- KEYS[2]  acquire latch, redisson_lock_acquire_latch:{<key>}:<request-id>
-- ARGV[1]  lease in ms
-- ARGV[2]  owner's write field, "<client-uuid>:<owner-id>:write"
-- ARGV[3]  latch lifetime in ms
-- Reply:   nil when acquired, otherwise the key's PTTL in ms. Only a free lock or the owner's
--          own write lock (re-entry: the lease is added to the TTL left, as Redisson does) can
--          be taken: no upgrade from read. A hash without 'mode' (another kind's lock) counts
--          as held. A re-send whose first send acquired replies nil and changes nothing.
if redis.call('exists', KEYS[2]) == 1 then
    return nil
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 0 then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], 1, 'px', ARGV[3])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[1]))
    redis.call('set', KEYS[2], 1, 'px', ARGV[3])
    return nil
end
return redis.call('pttl', KEYS[1])
