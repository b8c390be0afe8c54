-- Give back one permit of a Redisson RPermitExpirableSemaphore by its id, idempotently per
-- request: Redisson's tryRelease (the id taken out of the timeout set and, only if it was
-- there, `incrby N 1` and the count published), plus this crate's release latch beside the
-- key (Redisson never reads it).
-- KEYS[1]  semaphore key
-- KEYS[2]  timeout set, {<key>}:timeout
-- KEYS[3]  semaphore channel, redisson_sc:{<key>}
-- KEYS[4]  release latch, redisson_unlock_latch:{<key>}:<request-id>
-- ARGV[1]  permit id (16 bytes)
-- ARGV[2]  now, in ms since the epoch
-- ARGV[3]  publish command, "publish" or "spublish"
-- ARGV[4]  latch lifetime in ms
-- Reply:   1 given back in its lease; 0 not taken (unknown, given back, or reclaimed):
--          nothing changed; 2 given back after its lease had run out (Redisson answers
--          false for it, and gives it back all the same). A re-sent request (latch present)
--          replies the first answer and changes nothing.
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
-- The publish comes before the writes, so that an error reply means nothing changed.
local latched = redis.call('get', KEYS[4])
if latched then
    return tonumber(latched)
end
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if not expiry then
    return 0
end
local value = redis.call('get', KEYS[1])
local available = 0
if value then
    if not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or #value > 16 then
        return redis.error_reply('NOT_A_COUNT the key does not hold a count')
    end
    available = tonumber(value)
end
redis.call(ARGV[3], KEYS[3], available + 1)
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('incrby', KEYS[1], 1)
local answer = 1
if tonumber(expiry) <= tonumber(ARGV[2]) then
    answer = 2
end
redis.call('set', KEYS[4], answer, 'px', ARGV[4])
return answer
