-- Delete a lock whoever holds it, and wake its waiters (Redisson forceUnlock).
-- KEYS[1]  lock key
-- KEYS[2]  lock channel
-- ARGV[1]  unlock message, "0"
-- ARGV[2]  publish command, "publish" or "spublish"
-- Reply:   1 the lock existed and was deleted (and ARGV[1] published); 0 it did not exist.
--          A key that is not a hash is refused with WRONGTYPE and left alone.
-- The publish comes before the delete: if it fails (command missing, refused by the ACL), the
-- script errors with nothing changed. See unlock.lua.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
    return 0
end
if kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
redis.call('del', KEYS[1])
return 1
