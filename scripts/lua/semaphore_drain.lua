-- Take every permit of a Redisson RSemaphore (Redisson's drainPermits).
-- KEYS[1]  semaphore key
-- Reply:   the permits there were (as stored, even below zero), the key now 0; 0 for a key
--          that does not exist, which is left absent. Nothing is published: nothing was freed.
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
local value = redis.call('get', KEYS[1])
if not value then
    return 0
end
if not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or #value > 16 then
    return redis.error_reply('NOT_A_COUNT the key does not hold a count')
end
local permits = tonumber(value)
redis.call('set', KEYS[1], 0)
return permits
