-- Reads what Redis holds under one lock's name, in one call, with bounded work: the lock's
-- type and PTTL, and for a hash of at most ARGV[1] fields its fields; beside it (where KEYS
-- has them: a name whose keys span slots on a cluster sends the lock key alone) the fenced
-- lock's token, and the fair lock's queue and deadlines (at most ARGV[1] of each).
-- KEYS: lock, token, queue, timeout. Reads only.
local max = tonumber(ARGV[1])
local t = redis.call('type', KEYS[1])['ok']
local pttl = redis.call('pttl', KEYS[1])
local hlen, fields = 0, {}
if t == 'hash' then
    hlen = redis.call('hlen', KEYS[1])
    if hlen <= max then
        fields = redis.call('hgetall', KEYS[1])
    end
end
local token, queue, deadlines = false, {}, {}
if #KEYS >= 4 then
    if redis.call('type', KEYS[2])['ok'] == 'string' then
        token = redis.call('get', KEYS[2])
    end
    if redis.call('type', KEYS[3])['ok'] == 'list' then
        queue = redis.call('lrange', KEYS[3], 0, max - 1)
    end
    if redis.call('type', KEYS[4])['ok'] == 'zset' then
        deadlines = redis.call('zrange', KEYS[4], 0, max - 1, 'WITHSCORES')
    end
end
return {t, pttl, hlen, fields, token, queue, deadlines}
