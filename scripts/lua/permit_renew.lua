-- Watchdog renewal of permits of Redisson RPermitExpirableSemaphores this crate keeps alive
-- (Redisson renews none: its issue #3046). Across slots, no key is declared: the client sends
-- the call to the node it means, and a key the node does not serve answers -1. Declared (one
-- slot's sets as KEYS), the server redirects the whole call when the slot has moved.
-- KEYS[1..n]    timeout sets, {<key>}:timeout (declared form); ARGV[i+1] is KEYS[i]'s id
-- ARGV[1]       the new expiry: now + lease, in ms since the epoch
-- ARGV[2i]      timeout set i, {<key>}:timeout (i = 1..n; undeclared form)
-- ARGV[2i+1]    its permit id (16 bytes)
-- Reply:        array of n integers: 1 renewed (the id is still in the set: its score is set
--               to ARGV[1]); 0 gone (given back, or reclaimed by a client whose clock called
--               it expired); -1 not served by this node: nothing was done to it.
-- A permit still in the set is renewed even if a clock would call it expired: nobody has
-- given it back, so the count is whole either way.
local renewed = {}
local n = #KEYS
if n == 0 then
    n = (#ARGV - 1) / 2
end
for i = 1, n do
    local set, id
    if #KEYS > 0 then
        set, id = KEYS[i], ARGV[i + 1]
    else
        set, id = ARGV[2 * i], ARGV[2 * i + 1]
    end
    local score = redis.pcall('zscore', set, id)
    if type(score) == 'table' and score.err ~= nil then
        if string.find(score.err, 'WRONGTYPE', 1, true) then
            renewed[i] = 0
        else
            renewed[i] = -1
        end
    elseif score then
        redis.call('zadd', set, 'xx', ARGV[1], id)
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
