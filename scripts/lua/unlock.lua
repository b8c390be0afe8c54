-- Release one hold of a reentrant lock, idempotently (Redisson >= 3.25 unlock latch).
-- KEYS[1]  lock key
-- KEYS[2]  lock channel, redisson_lock__channel:{<key>}
-- KEYS[3]  unlock latch, redisson_unlock_latch:{<key>}:<request-id>
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  lease in ms, the TTL set when holds remain
-- ARGV[3]  owner field
-- ARGV[4]  publish command, "publish" or "spublish"
-- ARGV[5]  latch lifetime in ms
-- Reply:   nil  the owner holds no hold (nothing changed);
--          0    one hold released, others remain (TTL reset to the lease);
--          1    last hold released: key deleted, ARGV[1] published on KEYS[2].
--          A re-sent request (latch present) replies the first answer and changes nothing.
local latched = redis.call('get', KEYS[3])
if latched then
    return tonumber(latched)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if remaining > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
