-- Count the permits of a Redisson RPermitExpirableSemaphore, giving back the expired ones
-- first as Redisson's availablePermits, acquiredPermits and getPermits do (and publishing the
-- count when that frees some).
-- KEYS[1]  semaphore key
-- KEYS[2]  timeout set, {<key>}:timeout
-- KEYS[3]  semaphore channel, redisson_sc:{<key>}
-- ARGV[1]  now, in ms since the epoch
-- ARGV[2]  publish command, "publish" or "spublish"
-- Reply:   array {available, taken}: available is 0 for an absent key.
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
local value = redis.call('get', KEYS[1])
local available = 0
if value then
    if not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or #value > 16 then
        return redis.error_reply('NOT_A_COUNT the key does not hold a count')
    end
    available = tonumber(value)
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1])
if #expired > 0 then
    available = available + #expired
    if available > 0 then
        redis.call(ARGV[2], KEYS[3], available)
    end
    redis.call('zrem', KEYS[2], unpack(expired))
    redis.call('incrby', KEYS[1], #expired)
end
return {available, redis.call('zcard', KEYS[2])}
