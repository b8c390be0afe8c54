-- Add permits to a Redisson RPermitExpirableSemaphore (negative: take them away),
-- idempotently per request: Redisson's addPermits (the sum set, the number added published
-- when above zero), plus this crate's latch beside the key (Redisson never reads it).
-- KEYS[1]  semaphore key
-- KEYS[2]  semaphore channel, redisson_sc:{<key>}
-- KEYS[3]  latch, redisson_unlock_latch:{<key>}:<request-id>
-- ARGV[1]  permits to add (may be negative)
-- ARGV[2]  publish command, "publish" or "spublish"
-- ARGV[3]  latch lifetime in ms
-- Reply:   the permits available after it. A re-sent request (latch present) replies the
--          first answer and changes nothing.
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
local latched = redis.call('get', KEYS[3])
if latched then
    return tonumber(latched)
end
local value = redis.call('get', KEYS[1])
local available = 0
if value then
    if not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or #value > 16 then
        return redis.error_reply('NOT_A_COUNT the key does not hold a count')
    end
    available = tonumber(value)
end
if tonumber(ARGV[1]) > 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
available = available + tonumber(ARGV[1])
redis.call('set', KEYS[1], available)
redis.call('set', KEYS[3], available, 'px', ARGV[3])
return available
