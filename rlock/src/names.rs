//! Short forms of Redisson's names for the demo's timeline (the names themselves are the
//! library's, `redisson_lock::names`).

use redisson_lock::names::split_field;

/// The channel unlocks publish on.
pub use redisson_lock::names::lock_channel as channel;

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
    fn a_field_is_shortened_to_its_client_prefix() {
        let uuid = "0b7c9f7e-1111-4222-8333-444455556666";
        assert_eq!(short_field(&format!("{uuid}:42")), "0b7c9f7e…:42");
        assert_eq!(short_field(&format!("{uuid}:7:write")), "0b7c9f7e…:7:write");
        assert_eq!(short_field("mode"), "mode");
        assert_eq!(channel("{user}:1"), "redisson_lock__channel:{user}:1");
    }
}
