-- Set a Redisson RCountDownLatch's count if it has none (Redisson's trySetCount).
-- KEYS[1]  latch key (a string: the count)
-- KEYS[2]  latch channel, redisson_countdownlatch__channel__{<key>}
-- ARGV[1]  count (>= 1)
-- ARGV[2]  publish command, "publish" or "spublish"
-- Reply:   1 set, and "1" (a new count) published; 0 the key exists: nothing changed.
-- The publish (which the server may lack, or the ACL refuse) comes before the write, so that
-- an error reply means nothing changed.
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call(ARGV[2], KEYS[2], '1')
redis.call('set', KEYS[1], ARGV[1])
return 1
