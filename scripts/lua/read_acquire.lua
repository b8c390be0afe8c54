-- Acquire (or re-enter) the read half of a read-write lock: Redisson RReadLock's acquire, made
-- idempotent per request by an acquire latch (this crate's own key).
-- KEYS[1]  lock key (a hash: 'mode' = 'read' or 'write', readers' fields = hold counts,
--          writers' fields '<owner>:write' = hold counts)
-- KEYS[2]  acquire latch, redisson_lock_acquire_latch:{<key>}:<request-id>
-- KEYS[3]  this reader's timeout prefix, {<key>}:<owner>:rwlock_timeout: hold k keeps the
--          key <prefix>:k, expiring with that hold's lease
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field, "<client-uuid>:<owner-id>"
-- ARGV[3]  the same owner's write field, "<client-uuid>:<owner-id>:write"
-- ARGV[4]  latch lifetime in ms
-- Reply:   nil when acquired, otherwise the key's PTTL in ms. Readers share the lock; a writer
--          excludes them, except that the writer itself may also read (downgrade). A hash
--          without 'mode' is another kind's lock (an RLock): it counts as held and is left
--          alone (Redisson would write 'mode' into it). A re-send whose first send acquired
--          (latch present) replies nil and changes nothing.
if redis.call('exists', KEYS[2]) == 1 then
    return nil
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 1 then
    return redis.call('pttl', KEYS[1])
end
if mode == false or mode == 'read'
        or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    if mode == false then
        redis.call('hset', KEYS[1], 'mode', 'read')
    end
    local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[3] .. ':' .. holds, 1, 'px', ARGV[1])
    -- Never shorten the hash's TTL: another reader's lease may be longer.
    local pttl = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(pttl, tonumber(ARGV[1])))
    redis.call('set', KEYS[2], 1, 'px', ARGV[4])
    return nil
end
return redis.call('pttl', KEYS[1])
