-- Whether each of a batch of holds is still held, read only: the loss watch's check of the
-- holds it was told news of (a message on their channel, a resubscription). Keys in ARGV, none
-- declared, as renew_across.lua: one call per cluster master, whatever the keys' slots.
-- ARGV[2i-1]    lock key i (i = 1..n)
-- ARGV[2i]      its owner field
-- Reply:        array of n integers: 1 held by that owner; 0 not held by it (absent, taken
--               over, or not a hash); -1 not served by this node (its slot is elsewhere, or
--               migrating and the key already gone from here). Never 0 for a key the node
--               does not serve.
local held = {}
for i = 1, #ARGV / 2 do
    local found = redis.pcall('hexists', ARGV[2 * i - 1], ARGV[2 * i])
    if found == 1 then
        held[i] = 1
    elseif type(found) == 'table' and found.err ~= nil
        and not string.find(found.err, 'WRONGTYPE', 1, true) then
        held[i] = -1
    else
        held[i] = 0
    end
end
return held
