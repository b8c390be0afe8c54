-- Delete a spin lock whoever holds it (Redisson RSpinLock's forceUnlock: no message).
-- KEYS[1]  lock key
-- Reply:   1 the lock existed and was deleted; 0 it did not exist. A key that is not a hash
--          is refused with WRONGTYPE and left alone.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1])
return 1
