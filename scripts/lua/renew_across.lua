-- Watchdog renewal of a batch of locks across slots: on a cluster, one call renews every lock
-- of a master whatever their slots (a script may touch any key its node serves; only declared
-- keys must share a slot). No key is declared: the client sends the call to the master it
-- means, and the server checks each key as it is touched, so one the node does not serve
-- answers -1. (A declared first key would have the whole call redirected, ASKING included,
-- when that one key moved: the keys of its slot not yet moved would then read as absent.)
-- ARGV[1]       lease in ms: each renewed key's TTL is reset to exactly this
-- ARGV[2i]      lock key i (i = 1..n)
-- ARGV[2i+1]    its owner field
-- Reply:        array of n integers: 1 renewed (the owner still holds it); 0 not held by that
--               owner any more (absent, taken over, or not a hash); -1 not served by this
--               node (its slot is elsewhere, or migrating and the key already gone from here):
--               nothing was done to it. Never 0 for a key the node does not serve.
local renewed = {}
for i = 1, (#ARGV - 1) / 2 do
    local key, field = ARGV[2 * i], ARGV[2 * i + 1]
    local held = redis.pcall('hexists', key, field)
    if held == 1 then
        redis.call('pexpire', key, ARGV[1])
        renewed[i] = 1
    elseif type(held) == 'table' and held.err ~= nil
        and not string.find(held.err, 'WRONGTYPE', 1, true) then
        renewed[i] = -1
    else
        renewed[i] = 0
    end
end
return renewed
