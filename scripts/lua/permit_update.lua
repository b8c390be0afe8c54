-- Change the lease of a permit of a Redisson RPermitExpirableSemaphore (Redisson's
-- updateLeaseTime): expired permits are given back first, then the id's expiry is set if it
-- is still taken. Idempotent: a re-send sets the same expiry.
-- KEYS[1]  semaphore key
-- KEYS[2]  timeout set, {<key>}:timeout
-- KEYS[3]  semaphore channel, redisson_sc:{<key>}
-- ARGV[1]  permit id (16 bytes)
-- ARGV[2]  its new expiry: now + lease, in ms since the epoch
-- ARGV[3]  now, in ms since the epoch
-- ARGV[4]  publish command, "publish" or "spublish"
-- Reply:   1 updated; 0 not taken (unknown, given back, or expired): nothing set.
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
local value = redis.call('get', KEYS[1])
if value and (not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or #value > 16) then
    return redis.error_reply('NOT_A_COUNT the key does not hold a count')
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3])
if #expired > 0 then
    local available = tonumber(value or '0') + #expired
    if available > 0 then
        redis.call(ARGV[4], KEYS[3], available)
    end
    redis.call('zrem', KEYS[2], unpack(expired))
    redis.call('incrby', KEYS[1], #expired)
end
if redis.call('zscore', KEYS[2], ARGV[1]) then
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
    return 1
end
return 0
