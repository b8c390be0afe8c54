-- Acquire (or re-enter) a reentrant lock: Redisson RLock's tryLockInner.
-- KEYS[1]  lock key (a hash: field = owner, value = hold count)
-- ARGV[1]  lease in milliseconds (the key's TTL is reset to exactly this)
-- ARGV[2]  owner field, "<client-uuid>:<owner-id>"
-- Reply:   nil when acquired (hold count incremented),
--          otherwise the key's PTTL in ms (how long the holder's lease has left).
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
