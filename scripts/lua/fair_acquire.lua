-- Acquire (or re-enter) a fair lock: Redisson RFairLock's tryLockInner, both variants, made
-- idempotent per request by an acquire latch (this crate's own key; Redisson never reads it).
-- KEYS[1]  lock key (a hash: field = owner, value = hold count)
-- KEYS[2]  queue, redisson_lock_queue:{<key>} (a list of waiting owner fields, oldest first)
-- KEYS[3]  deadlines, redisson_lock_timeout:{<key>} (a zset: waiter -> when its place ends,
--          ms since the epoch in clients' clocks)
-- KEYS[4]  acquire latch, redisson_lock_acquire_latch:{<key>}:<request-id>
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field
-- ARGV[3]  the waiter's reservation in ms (Redisson's threadWaitTime: the call's wait, or
--          fairLockWaitTimeout)
-- ARGV[4]  now, ms since the epoch (the client's clock, as Redisson sends it)
-- ARGV[5]  latch lifetime in ms
-- ARGV[6]  'try': one attempt that never queues (Redisson's EVAL_NULL_BOOLEAN variant);
--          'wait': queue the owner if it cannot take the lock (the EVAL_LONG variant)
-- ARGV[7]  '1' reentrant, '0' non-reentrant (Redisson 4.4+ getNonReentrantFairLock)
-- Reply:   nil when acquired (the owner leaves the queue, and every waiter's deadline moves
--          ARGV[3] earlier, as Redisson's does); otherwise ms worth waiting before the next
--          attempt unless woken (the owner's channel gets '0' when it is the head and the lock
--          is released). A re-sent request that already acquired (latch present) replies nil;
--          a re-sent queueing request finds its place and does not queue twice.
--          The holder's second acquire on a non-reentrant lock is the error
--          NON_REENTRANT_REACQUIRE, changing nothing.
if redis.call('exists', KEYS[4]) == 1 then
    return nil
end
local now = tonumber(ARGV[4])
-- Waiters at the head whose place has ended leave (no other deadline moves). A head without
-- a deadline cannot be told to leave by anyone, so it leaves too.
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline == false or tonumber(deadline) <= now then
        redis.call('zrem', KEYS[3], head)
        redis.call('lpop', KEYS[2])
    else
        break
    end
end
local held = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if held and ARGV[7] == '0' then
    return redis.error_reply('NON_REENTRANT_REACQUIRE the lock is non-reentrant and this owner holds it')
end
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false or head == ARGV[2] then
        redis.call('lpop', KEYS[2])
        redis.call('zrem', KEYS[3], ARGV[2])
        for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
            redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), waiter)
        end
        redis.call('hset', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        redis.call('set', KEYS[4], 1, 'px', ARGV[5])
        return nil
    end
end
if held then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[4], 1, 'px', ARGV[5])
    return nil
end
local pttl = redis.call('pttl', KEYS[1])
if ARGV[6] == 'try' then
    return pttl
end
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
    -- Queued already: until the holder's lease ends, or (free, someone ahead has not taken
    -- it yet) until the head's place ends; the head's unlock wakes this owner sooner.
    if pttl > 0 or pttl == -1 then
        return pttl
    end
    local head = redis.call('lindex', KEYS[2], 0)
    local deadline = head and redis.call('zscore', KEYS[3], head)
    if deadline then
        return math.max(1, tonumber(deadline) - now)
    end
    return 1
end
-- Queue at the tail: the place ends a reservation after the previous waiter's does (or after
-- the holder's lease, when nobody waits).
local last = redis.call('lindex', KEYS[2], -1)
local ahead = last and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last)
local ttl = pttl
if ahead then
    ttl = tonumber(ahead) - now
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + now, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return math.max(ttl, 1)
