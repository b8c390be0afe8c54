-- Release one hold of a fair lock, idempotently (Redisson RFairLock's unlock, >= 3.25 latch).
-- KEYS[1]  lock key
-- KEYS[2]  queue, redisson_lock_queue:{<key>}
-- KEYS[3]  deadlines, redisson_lock_timeout:{<key>}
-- KEYS[4]  the lock's base channel, redisson_lock__channel:{<key>} (a waiter's own channel is
--          this plus ':' and its owner field)
-- KEYS[5]  unlock latch, redisson_unlock_latch:{<key>}:<request-id>
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  lease in ms, the TTL set when holds remain
-- ARGV[3]  owner field
-- ARGV[4]  now, ms since the epoch
-- ARGV[5]  publish command, "publish" or "spublish"
-- ARGV[6]  latch lifetime in ms
-- Reply:   nil the owner holds no hold (nothing changed but the head's wake-up, below);
--          0 one hold released, others remain; 1 last hold released: key deleted and the head
--          of the queue (after stale heads leave) woken on its own channel.
--          Unlike Redisson's, a lock already gone answers nil (its holder lost it: the caller is
--          told), though the head is woken as Redisson's does. A re-sent request (latch
--          present) replies the first answer and changes nothing.
local latched = redis.call('get', KEYS[5])
if latched then
    return tonumber(latched)
end
local now = tonumber(ARGV[4])
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
local function wake_head()
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
    end
end
if redis.call('exists', KEYS[1]) == 0 then
    wake_head()
    return nil
end
local holds = redis.call('hget', KEYS[1], ARGV[3])
if not holds then
    return nil
end
if tonumber(holds) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[5], 0, 'px', ARGV[6])
    return 0
end
wake_head()
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
return 1
