-- Take permits of a Redisson RSemaphore, idempotently per request: Redisson's tryAcquire
-- (`get N >= k` then `decrby N k`), plus this crate's acquire latch beside the key, which
-- Redisson never reads and which never changes what it sees.
-- KEYS[1]  semaphore key (a string: the permits available; absent reads as 0)
-- KEYS[2]  acquire latch, redisson_lock_acquire_latch:{<key>}:<request-id>
-- ARGV[1]  permits to take (>= 1)
-- ARGV[2]  latch lifetime in ms
-- Reply:   nil  taken (or taken already by this request: a re-send takes nothing more);
--          -1   not enough permits now: nothing changed (a release publishes; no TTL to wait).
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
if redis.call('exists', KEYS[2]) == 1 then
    return nil
end
local value = redis.call('get', KEYS[1])
local available = 0
if value then
    if not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or #value > 16 then
        return redis.error_reply('NOT_A_COUNT the key does not hold a count')
    end
    available = tonumber(value)
end
if available >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], 1, 'px', ARGV[2])
    return nil
end
return -1
