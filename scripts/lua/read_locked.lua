-- Whether a read-write lock is held for reading (Redisson RReadLock's isLocked): in read mode,
-- or in write mode with a reader beside the writer (a downgrade).
-- KEYS[1]  lock key
-- Reply:   1 or 0. A key that is not a hash is refused with WRONGTYPE.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1
end
return 0
