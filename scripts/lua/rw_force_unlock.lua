-- Delete a read-write lock in one mode whoever holds it, and wake its waiters (Redisson
-- RReadLock/RWriteLock forceUnlock).
-- KEYS[1]  lock key
-- KEYS[2]  channel, redisson_rwlock:{<key>}
-- ARGV[1]  the mode to delete, 'read' or 'write'
-- ARGV[2]  message, "0" (read) or "1" (write)
-- ARGV[3]  publish command
-- Reply:   1 the lock was held in that mode and is deleted (ARGV[2] published); 0 otherwise
--          (absent, or held in the other mode, or another kind's hash: left alone). A key that
--          is not a hash is refused with WRONGTYPE.
if redis.call('hget', KEYS[1], 'mode') ~= ARGV[1] then
    return 0
end
redis.call(ARGV[3], KEYS[2], ARGV[2])
redis.call('del', KEYS[1])
return 1
