-- Count a Redisson RCountDownLatch down by one, idempotently per request: Redisson's countDown
-- (`decr`; at or below 0 the key is deleted; at exactly 0 "0" is published: the latch opened),
-- plus this crate's latch key beside it (Redisson never reads it).
-- KEYS[1]  latch key (a string: the count; absent reads 0)
-- KEYS[2]  latch channel, redisson_countdownlatch__channel__{<key>}
-- KEYS[3]  request latch, redisson_unlock_latch:{<key>}:<request-id>
-- ARGV[1]  publish command, "publish" or "spublish"
-- ARGV[2]  request latch lifetime in ms
-- Reply:   the count after it (0: this count-down opened the latch; below 0: it was open
--          already, and stays absent). A re-sent request replies the first answer and counts
--          nothing more. A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
local latched = redis.call('get', KEYS[3])
if latched then
    return tonumber(latched)
end
local value = redis.call('get', KEYS[1])
local count = 0
if value then
    if not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or #value > 16 then
        return redis.error_reply('NOT_A_COUNT the key does not hold a count')
    end
    count = tonumber(value)
end
count = count - 1
if count == 0 then
    redis.call(ARGV[1], KEYS[2], '0')
end
if count <= 0 then
    redis.call('del', KEYS[1])
else
    redis.call('decr', KEYS[1])
end
redis.call('set', KEYS[3], count, 'px', ARGV[2])
return count
