-- Take a waiter that gave up out of a fair lock's queue (Redisson RFairLock's acquireFailed),
-- and wake the next head if the waiter was the head of a free lock.
-- KEYS[1]  lock key
-- KEYS[2]  queue
-- KEYS[3]  deadlines
-- KEYS[4]  the lock's base channel
-- ARGV[1]  the waiter's owner field
-- ARGV[2]  its reservation in ms (as its acquire sent it)
-- ARGV[3]  unlock message, "0"
-- ARGV[4]  publish command
-- Reply:   1 the waiter was queued and left; 0 it was not queued (nothing changed).
--          Every waiter behind it moves its deadline ARGV[2] earlier, as Redisson's does.
local queue = redis.call('lrange', KEYS[2], 0, -1)
local at = nil
for i, waiter in ipairs(queue) do
    if waiter == ARGV[1] then
        at = i
        break
    end
end
if at == nil then
    redis.call('zrem', KEYS[3], ARGV[1])
    return 0
end
if at == 1 and queue[2] ~= nil and redis.call('exists', KEYS[1]) == 0 then
    redis.call(ARGV[4], KEYS[4] .. ':' .. queue[2], ARGV[3])
end
for i = at + 1, #queue do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[i])
end
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
return 1
