-- Acquire (or re-enter) a reentrant lock: Redisson RLock's tryLockInner, made idempotent per
-- request by an acquire latch (this crate's own key; Redisson never reads it).
-- KEYS[1]  lock key (a hash: field = owner, value = hold count)
-- KEYS[2]  acquire latch, redisson_lock_acquire_latch:{<key>}:<request-id>
-- ARGV[1]  lease in milliseconds (the key's TTL is reset to exactly this)
-- ARGV[2]  owner field, "<client-uuid>:<owner-id>"
-- ARGV[3]  latch lifetime in ms
-- ARGV[4]  optional: '0' for a non-reentrant lock (Redisson 4.4+ getNonReentrantLock)
-- Reply:   nil when acquired (hold count incremented),
--          otherwise the key's PTTL in ms (how long the holder's lease has left).
--          A re-sent request that already acquired (latch present) replies nil and changes
--          nothing, so a retry after a lost reply never counts a hold twice. The latch is
--          written only when the hold is: a request that found the lock held left no trace.
--          Non-reentrant: the holder's second acquire is the error NON_REENTRANT_REACQUIRE
--          (Redisson's code; followed by words, as Redis 7 would prefix a bare word with ERR),
--          changing nothing.
if redis.call('exists', KEYS[2]) == 1 then
    return nil
end
local held = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if held and ARGV[4] == '0' then
    return redis.error_reply('NON_REENTRANT_REACQUIRE the lock is non-reentrant and this owner holds it')
end
if held or redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], 1, 'px', ARGV[3])
    return nil
end
return redis.call('pttl', KEYS[1])
