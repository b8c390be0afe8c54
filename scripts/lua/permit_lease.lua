-- The lease left of one permit of a Redisson RPermitExpirableSemaphore (Redisson's
-- getLeaseTime, 3.41+): expired permits are given back first, as its script does.
-- KEYS[1]  semaphore key
-- KEYS[2]  timeout set, {<key>}:timeout
-- KEYS[3]  semaphore channel, redisson_sc:{<key>}
-- ARGV[1]  permit id (16 bytes)
-- ARGV[2]  now, in ms since the epoch
-- ARGV[3]  publish command, "publish" or "spublish"
-- ARGV[4]  Redisson's score of a permit that never expires (922337203685477)
-- Reply:   the ms left (at least 1); -1 it never expires; -2 not taken (unknown, given back,
--          or expired).
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
local value = redis.call('get', KEYS[1])
if value and not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or (value and #value > 16) then
    return redis.error_reply('NOT_A_COUNT the key does not hold a count')
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[2])
if #expired > 0 then
    local available = tonumber(value or '0') + #expired
    if available > 0 then
        redis.call(ARGV[3], KEYS[3], available)
    end
    redis.call('zrem', KEYS[2], unpack(expired))
    redis.call('incrby', KEYS[1], #expired)
end
local score = redis.call('zscore', KEYS[2], ARGV[1])
if not score then
    return -2
end
if score == ARGV[4] then
    return -1
end
return math.max(tonumber(score) - tonumber(ARGV[2]), 1)
