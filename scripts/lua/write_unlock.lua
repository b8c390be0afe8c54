-- Release one write hold of a read-write lock, idempotently (Redisson RWriteLock's unlock).
-- KEYS[1]  lock key
-- KEYS[2]  channel, redisson_rwlock:{<key>}
-- KEYS[3]  unlock latch, redisson_unlock_latch:{<key>}:<request-id>
-- ARGV[1]  unlock message, "1" (wake every waiter: readers may all enter)
-- ARGV[2]  lease in ms, the TTL set when write holds remain
-- ARGV[3]  owner's write field
-- ARGV[4]  publish command
-- ARGV[5]  latch lifetime in ms
-- Reply:   nil  the owner holds no write hold (nothing changed; if the lock is gone, its
--               waiters are told again, as Redisson does);
--          0    one hold released, others remain (TTL reset to the lease);
--          1    the last write hold released: the key is deleted, or, when the owner also
--               reads (a downgrade), 'mode' becomes 'read'; either way ARGV[1] is published.
--               (Redisson publishes nothing on a downgrade, leaving other readers to their
--               timers: waking them is what they wait for.)
--          A re-sent request (latch present) replies the first answer and changes nothing.
local latched = redis.call('get', KEYS[3])
if latched then
    return tonumber(latched)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    if redis.call('exists', KEYS[1]) == 0 then
        redis.call(ARGV[4], KEYS[2], ARGV[1])
    end
    return nil
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[3]))
if mode ~= 'write' or not holds then
    return nil
end
if holds > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call(ARGV[4], KEYS[2], ARGV[1])
if redis.call('hlen', KEYS[1]) == 2 then
    redis.call('del', KEYS[1])
else
    redis.call('hdel', KEYS[1], ARGV[3])
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
