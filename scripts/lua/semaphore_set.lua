-- Set a Redisson RSemaphore's permits if it has none yet (Redisson's trySetPermits).
-- KEYS[1]  semaphore key
-- KEYS[2]  semaphore channel, redisson_sc:{<key>}
-- ARGV[1]  permits (>= 0)
-- ARGV[2]  publish command, "publish" or "spublish"
-- Reply:   1 set (and the count published); 0 the key exists: nothing changed.
-- The publish (which the server may lack, or the ACL refuse) comes before the write, so that
-- an error reply means nothing changed; waiters cannot act before the script ends.
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[1])
return 1
