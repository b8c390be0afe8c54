-- Acquire (or re-enter) a fenced lock: Redisson RFencedLock's token-returning tryLockInner,
-- made idempotent per request by an acquire latch that keeps the token it was given.
-- KEYS[1]  lock key (a hash: field = owner, value = hold count), as RLock's
-- KEYS[2]  acquire latch, redisson_lock_acquire_latch:{<key>}:<request-id>
-- KEYS[3]  token counter, redisson_lock_token:{<key>} (INCR on every acquisition, no TTL)
-- ARGV[1]  lease in milliseconds (the key's TTL is reset to exactly this)
-- ARGV[2]  owner field, "<client-uuid>:<owner-id>"
-- ARGV[3]  latch lifetime in ms
-- Reply:   {-1, token} when acquired (hold count incremented, counter incremented: re-entries
--          get a token of their own, as Redisson's do), otherwise {pttl, -1}.
--          A re-sent request that already acquired (latch present) replies the same token
--          and changes nothing: a retry after a lost reply neither counts a second hold nor
--          spends a second token.
local given = redis.call('get', KEYS[2])
if given then
    return {-1, tonumber(given)}
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    local token = redis.call('incr', KEYS[3])
    redis.call('set', KEYS[2], token, 'px', ARGV[3])
    return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}
