-- Release one read hold of a read-write lock, idempotently (Redisson RReadLock's unlock).
-- KEYS[1]  lock key
-- KEYS[2]  channel, redisson_rwlock:{<key>}
-- KEYS[3]  this reader's timeout prefix (see read_acquire.lua)
-- KEYS[4]  the key's tag prefix, {<key>} (or the key itself when it has a '{'): reader f's
--          timeout keys are <KEYS[4]>:<f>:rwlock_timeout:k
-- KEYS[5]  unlock latch, redisson_unlock_latch:{<key>}:<request-id>
-- ARGV[1]  unlock message, "0" (wake one waiter)
-- ARGV[2]  owner field
-- ARGV[3]  publish command, "publish" or "spublish"
-- ARGV[4]  latch lifetime in ms
-- Reply:   nil  the owner holds no read hold (nothing changed; if the lock is gone, its
--               waiters are told again, as Redisson does);
--          0    one hold released, the lock stays (other readers: its TTL becomes the longest
--               reader lease left; or this owner's write hold);
--          1    the lock is free: key deleted, ARGV[1] published.
--          A re-sent request (latch present) replies the first answer and changes nothing.
-- The outcome is worked out before anything is written, so that the publish (which can fail:
-- a command the server lacks, an ACL) comes before the first write. See unlock.lua.
local latched = redis.call('get', KEYS[5])
if latched then
    return tonumber(latched)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    if redis.call('exists', KEYS[1]) == 0 then
        redis.call(ARGV[3], KEYS[2], ARGV[1])
    end
    return nil
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if not holds then
    return nil
end
-- What stays once this hold goes: other fields, and the longest reader lease among them.
local others, longest = 0, -3
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    if field ~= 'mode' then
        local count = tonumber(redis.call('hget', KEYS[1], field))
        if field == ARGV[2] then
            count = holds - 1
        end
        if count and count > 0 then
            others = others + 1
            for k = 1, count do
                local ttl = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. k)
                longest = math.max(longest, ttl)
            end
        end
    end
end
if others > 0 and (longest > 0 or mode == 'write') then
    if holds > 1 then
        redis.call('hincrby', KEYS[1], ARGV[2], -1)
    else
        redis.call('hdel', KEYS[1], ARGV[2])
    end
    redis.call('del', KEYS[3] .. ':' .. holds)
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
    end
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
end
-- The last live hold (readers left without a live lease are gone too, as in Redisson).
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('del', KEYS[1], KEYS[3] .. ':' .. holds)
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1
