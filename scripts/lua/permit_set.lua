-- Set the total permits of a Redisson RPermitExpirableSemaphore, taken ones included
-- (Redisson's setPermits): the available count moves by the difference, and the new total is
-- published. Idempotent: a re-send sets the same total.
-- KEYS[1]  semaphore key
-- KEYS[2]  timeout set, {<key>}:timeout
-- KEYS[3]  semaphore channel, redisson_sc:{<key>}
-- ARGV[1]  the total (>= 0)
-- ARGV[2]  publish command, "publish" or "spublish"
-- Reply:   the permits available after it.
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
local value = redis.call('get', KEYS[1])
if not value then
    redis.call(ARGV[2], KEYS[3], ARGV[1])
    redis.call('set', KEYS[1], ARGV[1])
    return tonumber(ARGV[1])
end
if not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or #value > 16 then
    return redis.error_reply('NOT_A_COUNT the key does not hold a count')
end
local available = tonumber(value)
local total = available + redis.call('zcard', KEYS[2])
if total == tonumber(ARGV[1]) then
    return available
end
redis.call(ARGV[2], KEYS[3], ARGV[1])
return redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
