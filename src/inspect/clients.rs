//! The name a [`LockClient`](crate::LockClient) gives its connections, and reading it back
//! from `CLIENT LIST`.

use std::collections::HashMap;
use std::fmt;

/// Who a client is: the name it gives its connections,
/// `rlock:<client id>:<service>@<host>:<pid>` (and `:watch` when its holders listen on their
/// locks' channels: [`Config::with_prompt_loss_detection`](crate::Config::with_prompt_loss_detection)),
/// as `CLIENT LIST` shows it, with the address of a connection that carries it.
///
/// ```
/// use redisson_lock::inspect::ClientName;
///
/// let name: ClientName = "rlock:6e3d:billing@web-1:4242".parse().unwrap();
/// assert_eq!((name.client_id.as_str(), name.service.as_str()), ("6e3d", "billing"));
/// assert_eq!((name.host.as_str(), name.pid), ("web-1", 4242));
/// assert_eq!(name.to_string(), "rlock:6e3d:billing@web-1:4242");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientName {
    /// The client id its lock fields carry.
    pub client_id: String,
    /// The service ([`Config::with_service_name`](crate::Config::with_service_name); the
    /// program's name by default).
    pub service: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Whether its holders listen on their locks' channels (so each lock it holds has one
    /// subscriber that is not a waiter).
    pub watches: bool,
    /// The address of one of its connections (`ip:port`, from `CLIENT LIST`), when read
    /// from a server.
    pub addr: Option<String>,
}

const PREFIX: &str = "rlock:";
const WATCH: &str = ":watch";

impl fmt::Display for ClientName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `CLIENT SETNAME` refuses spaces and newlines: each part keeps to a safe alphabet.
        write!(
            f,
            "{PREFIX}{}:{}@{}:{}{}",
            safe(&self.client_id),
            safe(&self.service),
            safe(&self.host),
            self.pid,
            if self.watches { WATCH } else { "" }
        )
    }
}

/// A connection name not of the form `rlock:<client id>:<service>@<host>:<pid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAClientName;

impl fmt::Display for NotAClientName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not an rlock:<client id>:<service>@<host>:<pid> connection name")
    }
}

impl std::error::Error for NotAClientName {}

impl std::str::FromStr for ClientName {
    type Err = NotAClientName;

    fn from_str(name: &str) -> Result<ClientName, NotAClientName> {
        let rest = name.strip_prefix(PREFIX).ok_or(NotAClientName)?;
        let (rest, watches) = match rest.strip_suffix(WATCH) {
            Some(rest) => (rest, true),
            None => (rest, false),
        };
        let (client_id, rest) = rest.split_once(':').ok_or(NotAClientName)?;
        let (rest, pid) = rest.rsplit_once(':').ok_or(NotAClientName)?;
        let (service, host) = rest.rsplit_once('@').ok_or(NotAClientName)?;
        Ok(ClientName {
            client_id: client_id.to_string(),
            service: service.to_string(),
            host: host.to_string(),
            pid: pid.parse().map_err(|_| NotAClientName)?,
            watches,
            addr: None,
        })
    }
}

impl ClientName {
    pub(crate) fn new(client_id: &str, service: &str, host: &str, watches: bool) -> ClientName {
        ClientName {
            client_id: client_id.to_string(),
            service: service.to_string(),
            host: host.to_string(),
            pid: std::process::id(),
            watches,
            addr: None,
        }
    }
}

/// `s` with anything but letters, digits, `.`, `_` and `-` made `_`.
fn safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The named clients of a `CLIENT LIST` reply, by client id (the first connection's address
/// of each).
pub(crate) fn named_clients(list: &str, into: &mut HashMap<String, ClientName>) {
    for line in list.lines() {
        let mut name = None;
        let mut addr = None;
        for pair in line.split(' ') {
            match pair.split_once('=') {
                Some(("name", v)) => name = v.parse::<ClientName>().ok(),
                Some(("addr", v)) => addr = Some(v.to_string()),
                _ => {}
            }
        }
        if let Some(mut name) = name {
            name.addr = addr;
            into.entry(name.client_id.clone()).or_insert(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_made_safe_for_client_setname_and_read_back() {
        let name = ClientName::new("6e3d-aa", "my service", "host:1", false);
        let text = name.to_string();
        assert!(
            text.starts_with("rlock:6e3d-aa:my_service@host_1:"),
            "{text}"
        );
        assert!(!text.contains(' '));
        let back: ClientName = text.parse().unwrap();
        assert_eq!(back.client_id, "6e3d-aa");
        assert_eq!(back.pid, std::process::id());
        assert!(!back.watches);
        let watching = ClientName::new("c", "svc", "h", true).to_string();
        assert!(watching.ends_with(":watch"), "{watching}");
        let back: ClientName = watching.parse().unwrap();
        assert!(back.watches && back.pid == std::process::id());
        assert!("redisson-client".parse::<ClientName>().is_err());
        assert!("rlock:x:svc@host:notapid".parse::<ClientName>().is_err());
    }

    #[test]
    fn client_list_lines_give_the_named_clients() {
        let list = "id=3 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=8 name=rlock:c1:svc@h:12 age=1\n\
                    id=4 addr=127.0.0.1:5001 laddr=127.0.0.1:6379 fd=9 name= age=1\n\
                    id=5 addr=127.0.0.1:5002 laddr=127.0.0.1:6379 fd=10 name=rlock:c1:svc@h:12 age=1\n";
        let mut clients = HashMap::new();
        named_clients(list, &mut clients);
        assert_eq!(clients.len(), 1);
        assert_eq!(clients["c1"].addr.as_deref(), Some("127.0.0.1:5000"));
        assert_eq!(clients["c1"].service, "svc");
    }
}
