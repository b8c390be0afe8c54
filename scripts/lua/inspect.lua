-- Reads what Redis holds under one lock's name, in one call, with bounded work: the lock's
-- type and PTTL, and for a hash of at most ARGV[1] fields its fields; for a string (a
-- semaphore's permits, a latch's count) its value; beside it (where KEYS has them: a name
-- whose keys span slots on a cluster sends the lock key alone) the fenced lock's token, the
-- fair lock's queue and deadlines, and an expiring-permit semaphore's permits taken (at most
-- ARGV[1] of each, and how many there are).
-- KEYS: lock, token, queue, timeout, permits ({<key>}:timeout). Reads only.
local max = tonumber(ARGV[1])
local t = redis.call('type', KEYS[1])['ok']
local pttl = redis.call('pttl', KEYS[1])
local hlen, fields, value = 0, {}, false
if t == 'hash' then
    hlen = redis.call('hlen', KEYS[1])
    if hlen <= max then
        fields = redis.call('hgetall', KEYS[1])
    end
elseif t == 'string' then
    -- (pcall: an ACL without GETRANGE still reads the rest.)
    local read = redis.pcall('getrange', KEYS[1], 0, 31)
    if type(read) == 'string' then
        value = read
    end
end
local token, queue, deadlines, permits, taken = false, {}, {}, {}, 0
if #KEYS >= 5 then
    if redis.call('type', KEYS[2])['ok'] == 'string' then
        token = redis.call('get', KEYS[2])
    end
    if redis.call('type', KEYS[3])['ok'] == 'list' then
        queue = redis.call('lrange', KEYS[3], 0, max - 1)
    end
    if redis.call('type', KEYS[4])['ok'] == 'zset' then
        deadlines = redis.call('zrange', KEYS[4], 0, max - 1, 'WITHSCORES')
    end
    if redis.call('type', KEYS[5])['ok'] == 'zset' then
        taken = redis.call('zcard', KEYS[5])
        permits = redis.call('zrange', KEYS[5], 0, max - 1, 'WITHSCORES')
    end
end
return {t, pttl, hlen, fields, token, queue, deadlines, value, permits, taken}
