-- Delete a Redisson RCountDownLatch (Redisson's delete): its waiters are told ("1").
-- KEYS[1]  latch key
-- KEYS[2]  latch channel, redisson_countdownlatch__channel__{<key>}
-- ARGV[1]  publish command, "publish" or "spublish"
-- Reply:   1 deleted; 0 it did not exist (nothing published).
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
redis.call(ARGV[1], KEYS[2], '1')
redis.call('del', KEYS[1])
return 1
