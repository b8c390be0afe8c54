//! Redisson's naming rules for the keys and channels derived from a lock's key.
//!
//! Derived names carry the lock's key in a cluster hash tag so they share its slot, unless the
//! key already contains `{`, in which case the user's own tag is trusted as is (even a
//! malformed one: the rule is copied exactly so both sides compute the same names). Tools that
//! inspect other Redisson layouts (fenced, read-write, fair locks) build their names with
//! [`prefixed`] and [`suffixed`].
//!
//! ```
//! use redisson_lock::names;
//!
//! assert_eq!(names::lock_channel("orders"), "redisson_lock__channel:{orders}");
//! assert_eq!(names::prefixed("redisson_lock_token", "orders"), "redisson_lock_token:{orders}");
//! assert_eq!(names::prefixed("redisson_lock_token", "{eu}:orders"), "redisson_lock_token:{eu}:orders");
//! ```

/// `prefix:{name}`, or `prefix:name` when `name` contains `{`.
pub fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `{name}:suffix`, or `name:suffix` when `name` contains `{`.
///
/// ```
/// assert_eq!(redisson_lock::names::suffixed("rw", "ab:1"), "{rw}:ab:1");
/// ```
pub fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// The pub/sub channel an RLock's unlock publishes on (`key` includes any key prefix).
pub fn lock_channel(key: &str) -> String {
    prefixed("redisson_lock__channel", key)
}

/// The channel a server's keyspace notifications for `key` of database `db` come on
/// (`notify-keyspace-events` with `K`).
///
/// ```
/// assert_eq!(redisson_lock::names::keyspace_channel(0, "jobs"), "__keyspace@0__:jobs");
/// assert_eq!(redisson_lock::names::keyspace_key("__keyspace@0__:jobs"), Some("jobs"));
/// ```
pub fn keyspace_channel(db: i64, key: &str) -> String {
    format!("__keyspace@{db}__:{key}")
}

/// The key a keyspace channel ([`keyspace_channel`]) is about; `None` for any other channel.
/// On a cluster such a channel lives where its key does (a node sends its own keys' events),
/// not where the channel's name would hash.
pub fn keyspace_key(channel: &str) -> Option<&str> {
    let rest = channel.strip_prefix("__keyspace@")?;
    let (_db, key) = rest.split_once("__:")?;
    Some(key)
}

/// The pub/sub channel a semaphore's releases and permit changes publish on, the permits
/// available after each (Redisson's `RSemaphore`; `key` includes any key prefix).
///
/// ```
/// assert_eq!(redisson_lock::names::semaphore_channel("pool"), "redisson_sc:{pool}");
/// ```
pub fn semaphore_channel(key: &str) -> String {
    prefixed("redisson_sc", key)
}

/// The pub/sub channel of a count-down latch (Redisson's `RCountDownLatch`; `key` includes any
/// key prefix): `0` when it opens, `1` when a count is set or it is deleted. Redisson wraps the
/// name in braces whatever it holds, so a name with a brace of its own puts the channel in
/// another cluster slot than the key (refused on a cluster, as Redisson's script would be).
///
/// ```
/// use redisson_lock::names;
///
/// assert_eq!(names::latch_channel("batch"), "redisson_countdownlatch__channel__{batch}");
/// assert_eq!(names::latch_channel("a{b}c"), "redisson_countdownlatch__channel__{a{b}c}");
/// ```
pub fn latch_channel(key: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{key}}}")
}

/// The Redis Cluster slot `key` hashes to (CRC16 of its hash tag, or of the whole key).
///
/// ```
/// use redisson_lock::names;
///
/// assert_eq!(names::cluster_slot("{orders}:1"), names::cluster_slot("orders"));
/// assert_eq!(names::cluster_slot(&names::lock_channel("orders")), names::cluster_slot("orders"));
/// ```
pub fn cluster_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match bytes.iter().position(|&b| b == b'{') {
        Some(open) => match bytes[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    crc16(hashed) % 16384
}

/// CRC16 (XMODEM), as Redis Cluster hashes keys.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A fenced lock's token counter, as Redisson's `RFencedLock` names it: incremented on every
/// acquisition, never expiring.
///
/// ```
/// assert_eq!(redisson_lock::names::token_key("orders"), "redisson_lock_token:{orders}");
/// ```
pub fn token_key(key: &str) -> String {
    prefixed("redisson_lock_token", key)
}

/// A fair lock's queue of waiting owner fields, first in line first (Redisson's
/// `RFairLock`, a list).
///
/// ```
/// assert_eq!(redisson_lock::names::queue_key("jobs"), "redisson_lock_queue:{jobs}");
/// ```
pub fn queue_key(key: &str) -> String {
    prefixed("redisson_lock_queue", key)
}

/// A fair lock's waiter deadlines (a sorted set: owner field, epoch ms when it gives up).
///
/// ```
/// assert_eq!(redisson_lock::names::timeout_key("jobs"), "redisson_lock_timeout:{jobs}");
/// ```
pub fn timeout_key(key: &str) -> String {
    prefixed("redisson_lock_timeout", key)
}

/// An owner field split into its parts: `<client id>:<owner id>[:write]` gives the client id,
/// the owner id and whether it is a write-lock owner; a field of another shape gives `None`s.
///
/// ```
/// use redisson_lock::names::split_field;
/// assert_eq!(split_field("6e3d:7:write"), (Some("6e3d"), Some(7), true));
/// assert_eq!(split_field("mode"), (None, None, false));
/// ```
pub fn split_field(field: &str) -> (Option<&str>, Option<i64>, bool) {
    let (base, write) = match field.strip_suffix(":write") {
        Some(base) => (base, true),
        None => (field, false),
    };
    match base.rsplit_once(':') {
        Some((client, id)) if !client.is_empty() => match id.parse::<i64>() {
            Ok(id) => (Some(client), Some(id), write),
            Err(_) => (None, None, write),
        },
        _ => (None, None, write),
    }
}

/// The channel both halves of a read-write lock publish on (Redisson's `redisson_rwlock:{N}`):
/// `0` after the last read unlock, `1` (wake every waiter) after a write unlock.
///
/// ```
/// assert_eq!(redisson_lock::names::rwlock_channel("doc"), "redisson_rwlock:{doc}");
/// ```
pub fn rwlock_channel(key: &str) -> String {
    prefixed("redisson_rwlock", key)
}

/// The prefix of one reader's timeout keys (`<prefix>:1` .. `<prefix>:<holds>`, one per hold,
/// each expiring with that hold's lease): a read unlock sets the hash's TTL from the longest
/// of them. `field` is the reader's owner field.
///
/// ```
/// let prefix = redisson_lock::names::read_timeout_prefix("doc", "6e3d:7");
/// assert_eq!(prefix, "{doc}:6e3d:7:rwlock_timeout");
/// ```
pub fn read_timeout_prefix(key: &str, field: &str) -> String {
    let mut prefix = suffixed(key, field);
    prefix.push_str(":rwlock_timeout");
    prefix
}

/// The unlock latch key for one logical unlock request (32 hex characters of request id).
///
/// ```
/// let latch = redisson_lock::names::unlock_latch("orders", "00112233445566778899aabbccddeeff");
/// assert_eq!(latch, "redisson_unlock_latch:{orders}:00112233445566778899aabbccddeeff");
/// ```
pub fn unlock_latch(key: &str, request_id: &str) -> String {
    let mut latch = prefixed("redisson_unlock_latch", key);
    latch.push(':');
    latch.push_str(request_id);
    latch
}

/// The acquire latch key for one acquire call (all its attempts share it): it marks that the
/// call's hold was taken, so a re-sent attempt cannot take a second one. This crate's own key,
/// in the lock's slot; Redisson never reads it.
///
/// ```
/// let latch = redisson_lock::names::acquire_latch("orders", "00112233445566778899aabbccddeeff");
/// assert_eq!(latch, "redisson_lock_acquire_latch:{orders}:00112233445566778899aabbccddeeff");
/// ```
pub fn acquire_latch(key: &str, request_id: &str) -> String {
    let mut latch = prefixed("redisson_lock_acquire_latch", key);
    latch.push(':');
    latch.push_str(request_id);
    latch
}

/// A fresh request id (of an unlock or an acquire call): 32 lower-case hex characters (16 random bytes).
pub(crate) fn new_request_id() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes: [u8; 16] = rand::random();
    let mut id = String::with_capacity(32);
    for b in bytes {
        id.push(HEX[usize::from(b >> 4)] as char);
        id.push(HEX[usize::from(b & 0x0f)] as char);
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_the_cluster_spec() {
        // The Redis Cluster specification's test vector, and its hash tag examples.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(cluster_slot("123456789"), 12739);
        assert_eq!(
            cluster_slot("{user1000}.following"),
            cluster_slot("{user1000}.followers")
        );
        assert_eq!(cluster_slot("foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_eq!(cluster_slot("foo{{bar}}zap"), cluster_slot("{bar"));
        assert_eq!(cluster_slot("foo{bar}{zap}"), cluster_slot("bar"));
        // A lock's derived names share its slot.
        let key = "orders:42";
        assert_eq!(cluster_slot(&lock_channel(key)), cluster_slot(key));
    }

    #[test]
    fn channel_wraps_plain_names_in_a_hash_tag() {
        assert_eq!(lock_channel("orders"), "redisson_lock__channel:{orders}");
    }

    #[test]
    fn names_with_a_brace_are_trusted_as_is() {
        assert_eq!(lock_channel("{user}:1"), "redisson_lock__channel:{user}:1");
        assert_eq!(lock_channel("bad{"), "redisson_lock__channel:bad{");
        assert_eq!(suffixed("a{b}", "x"), "a{b}:x");
        assert_eq!(suffixed("ab", "x"), "{ab}:x");
    }

    #[test]
    fn latch_appends_the_request_id() {
        assert_eq!(
            unlock_latch("orders", "00ff"),
            "redisson_unlock_latch:{orders}:00ff"
        );
    }

    #[test]
    fn request_ids_are_32_lower_hex_and_fresh() {
        let a = new_request_id();
        let b = new_request_id();
        assert_eq!(a.len(), 32);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
