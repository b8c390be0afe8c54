//! Redisson's names for the keys that sit beside a lock (see docs/PROTOCOL.md §1).
//!
//! The rule itself is the library's (`redisson_lock::names`); here are the names of the layouts
//! the library does not implement yet (fenced, fair), which `status` reads.

use redisson_lock::names::prefixed;

/// The fenced lock's token counter.
pub fn token_key(key: &str) -> String {
    prefixed("redisson_lock_token", key)
}

/// The fair lock's queue of waiting owners (a list).
pub fn queue_key(key: &str) -> String {
    prefixed("redisson_lock_queue", key)
}

/// The fair lock's waiter deadlines (a sorted set).
pub fn timeout_key(key: &str) -> String {
    prefixed("redisson_lock_timeout", key)
}

/// The channel unlocks publish on.
pub use redisson_lock::names::lock_channel as channel;

/// An owner field split into its parts: `<client-uuid>:<owner-id>[:write]` gives the client id,
/// the owner id and whether it is a write-lock owner. Fields of another shape give `None`s.
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

/// A short form of an owner field for timelines: the first 8 characters of the client id.
pub fn short_field(field: &str) -> String {
    match split_field(field) {
        (Some(client), Some(id), write) if client.len() > 8 => {
            let suffix = if write { ":write" } else { "" };
            format!("{}…:{id}{suffix}", &client[..8])
        }
        _ => field.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_follow_redisson() {
        assert_eq!(token_key("orders"), "redisson_lock_token:{orders}");
        assert_eq!(queue_key("orders"), "redisson_lock_queue:{orders}");
        assert_eq!(timeout_key("p:orders"), "redisson_lock_timeout:{p:orders}");
        assert_eq!(channel("{user}:1"), "redisson_lock__channel:{user}:1");
        assert_eq!(token_key("bad{"), "redisson_lock_token:bad{");
    }

    #[test]
    fn fields_split_into_client_and_owner() {
        let uuid = "0b7c9f7e-1111-4222-8333-444455556666";
        assert_eq!(
            split_field(&format!("{uuid}:42")),
            (Some(uuid), Some(42), false)
        );
        assert_eq!(
            split_field(&format!("{uuid}:7:write")),
            (Some(uuid), Some(7), true)
        );
        assert_eq!(split_field("mode"), (None, None, false));
        assert_eq!(split_field(":5"), (None, None, false));
        assert_eq!(split_field("a:b"), (None, None, false));
        assert_eq!(short_field(&format!("{uuid}:42")), "0b7c9f7e…:42");
    }
}
