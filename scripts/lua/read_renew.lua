-- Watchdog renewal of a batch of read holds: each reader's hash and its own timeout keys only
-- (as Redisson 4.4+ renews; 3.23.4 renewed every reader's, keeping dead clients' alive).
-- KEYS[1..n]    lock keys
-- ARGV[1]       lease in ms
-- ARGV[2i]      owner field of KEYS[i]
-- ARGV[2i+1]    its timeout prefix (see read_acquire.lua)
-- Reply:        array of n integers: 1 renewed; 0 not held by that reader any more (no field,
--               or one of its timeout keys gone: its hold expired once, and another reader's
--               unlock may already have freed the lock under it). The hash's TTL is never
--               shortened (another reader's lease may be longer).
local renewed = {}
for i = 1, #KEYS do
    local field, prefix = ARGV[2 * i], ARGV[2 * i + 1]
    local holds = tonumber(redis.pcall('hget', KEYS[i], field))
    local alive = holds ~= nil and holds > 0
    if alive then
        for k = 1, holds do
            if redis.call('pexpire', prefix .. ':' .. k, ARGV[1]) == 0 then
                alive = false
            end
        end
    end
    if alive then
        local pttl = redis.call('pttl', KEYS[i])
        redis.call('pexpire', KEYS[i], math.max(pttl, tonumber(ARGV[1])))
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
