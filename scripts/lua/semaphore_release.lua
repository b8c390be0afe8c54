-- Give permits back to a Redisson RSemaphore, idempotently per request: Redisson's release
-- (`incrby N k`, then publish the count after it on the semaphore's channel), plus this
-- crate's release latch beside the key (Redisson never reads it).
-- KEYS[1]  semaphore key (a string: the permits available)
-- KEYS[2]  semaphore channel, redisson_sc:{<key>}
-- KEYS[3]  release latch, redisson_unlock_latch:{<key>}:<request-id>
-- ARGV[1]  permits to give back (>= 1)
-- ARGV[2]  publish command, "publish" or "spublish"
-- ARGV[3]  latch lifetime in ms
-- ARGV[4]  "1": only if the key exists (Redisson 4's releaseIfExists); absent or "0": always
-- Reply:   the permits available after the release; nil if ARGV[4] asked for an existing
--          key and there was none (nothing changed). A re-sent request (latch present)
--          replies the first answer and gives nothing more.
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed.
-- The publish (which the server may lack, or the ACL refuse) comes before the write, so that
-- an error reply means nothing changed; waiters cannot act before the script ends.
local latched = redis.call('get', KEYS[3])
if latched then
    return tonumber(latched)
end
local value = redis.call('get', KEYS[1])
if not value and ARGV[4] == '1' then
    return false
end
local available = 0
if value then
    if not (value == '0' or string.match(value, '^%-?[1-9]%d*$')) or #value > 16 then
        return redis.error_reply('NOT_A_COUNT the key does not hold a count')
    end
    available = tonumber(value)
end
available = available + tonumber(ARGV[1])
redis.call(ARGV[2], KEYS[2], available)
redis.call('incrby', KEYS[1], ARGV[1])
redis.call('set', KEYS[3], available, 'px', ARGV[3])
return available
