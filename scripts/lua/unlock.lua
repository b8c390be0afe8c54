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
-- Every call that can fail for a reason outside the data (a publish command the server lacks
-- or the ACL refuses) comes before the first write: Redis keeps a script's writes made before
-- an error, so an error reply must mean nothing changed. Waiters cannot act before the script
-- ends, so publishing before the delete wakes nobody early.
local latched = redis.call('get', KEYS[3])
if latched then
    return tonumber(latched)
end
local holds = redis.call('hget', KEYS[1], ARGV[3])
if not holds then
    return nil
end
if tonumber(holds) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('del', KEYS[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
