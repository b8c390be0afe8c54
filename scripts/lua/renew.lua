-- Watchdog renewal of a batch of locks (Redisson >= 3.44 batches up to 100 keys per call).
-- KEYS[1..n]    lock keys
-- ARGV[1]       lease in ms: each renewed key's TTL is reset to exactly this
-- ARGV[2..n+1]  owner field for KEYS[i] is ARGV[i+1]
-- Reply:        array of n integers: 1 renewed (the owner still holds it), 0 not held by that
--               owner any more (absent, taken over, or not a hash). Nothing else is touched.
local renewed = {}
for i = 1, #KEYS do
    local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
    if held == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
