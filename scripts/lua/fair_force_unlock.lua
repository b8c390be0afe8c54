-- Delete a fair lock whoever holds it, and wake the head of its queue (Redisson RFairLock's
-- forceUnlock).
-- KEYS[1]  lock key
-- KEYS[2]  queue
-- KEYS[3]  deadlines
-- KEYS[4]  the lock's base channel
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  now, ms since the epoch
-- ARGV[3]  publish command
-- Reply:   1 the lock existed and was deleted; 0 it did not exist. A key that is not a hash
--          is refused with WRONGTYPE and left alone. The queue is kept: its waiters are served
--          in order.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local now = tonumber(ARGV[2])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline == false or tonumber(deadline) <= now then
        redis.call('zrem', KEYS[3], head)
        redis.call('lpop', KEYS[2])
    else
        break
    end
end
if kind == 'none' then
    return 0
end
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
    redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
end
redis.call('del', KEYS[1])
return 1
