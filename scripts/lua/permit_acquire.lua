-- Take one permit of a Redisson RPermitExpirableSemaphore, idempotently per request:
-- Redisson's tryAcquire (expired permits given back first, then `get N >= 1`, `decrby N 1`,
-- the id added to the timeout set with its expiry), plus this crate's acquire latch beside
-- the key (Redisson never reads it): a re-send after a lost reply takes nothing more, and a
-- client that lost the reply can ask the latch whether the permit was taken.
-- KEYS[1]  semaphore key (a string: the permits available; absent reads as 0)
-- KEYS[2]  timeout set, {<key>}:timeout (member: the permit id's 16 bytes; score: its expiry
--          in ms since the epoch, by the acquiring client's clock)
-- KEYS[3]  semaphore channel, redisson_sc:{<key>}
-- KEYS[4]  acquire latch, redisson_lock_acquire_latch:{<key>}:<request-id>
-- ARGV[1]  permit id (16 bytes, as Redisson stores them)
-- ARGV[2]  its expiry: now + lease, in ms since the epoch
-- ARGV[3]  now, in ms since the epoch (what is at or before it has expired)
-- ARGV[4]  publish command, "publish" or "spublish"
-- ARGV[5]  Redisson's score of a permit that never expires (922337203685477)
-- ARGV[6]  latch lifetime in ms
-- Reply:   nil  taken (or taken already by this request);
--          n    not enough permits: the earliest expiry among the taken ones is n ms away;
--          -1   not enough permits, and none taken that will expire.
--          A key that holds no integer (as INCRBY reads one, 16 characters at most) is the error NOT_A_COUNT, nothing changed. The publish
--          comes before the writes, so that an error reply means nothing changed.
if redis.call('exists', KEYS[4]) == 1 then
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
-- This id listed already: the permit of an earlier hold of this owner whose release did not
-- happen. It is taken once: renewed, not taken again.
if redis.call('zscore', KEYS[2], ARGV[1]) then
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
    redis.call('set', KEYS[4], 1, 'px', ARGV[6])
    return nil
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, 1)
if #expired > 0 then
    available = available + #expired
    if available > 0 then
        redis.call(ARGV[4], KEYS[3], available)
    end
    redis.call('zrem', KEYS[2], unpack(expired))
    redis.call('incrby', KEYS[1], #expired)
end
if available >= 1 then
    redis.call('decrby', KEYS[1], 1)
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
    redis.call('set', KEYS[4], 1, 'px', ARGV[6])
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return nil
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[1] ~= nil and first[2] ~= ARGV[5] then
    return math.max(tonumber(first[2]) - tonumber(ARGV[3]), 1)
end
return -1
