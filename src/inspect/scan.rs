//! Every lock whose name matches a pattern, node by node, a bounded page at a time.

use std::collections::{HashMap, VecDeque};

use super::clients::ClientName;
use super::read::{client_names, read_page};
use super::{LockInfo, LockKind, LockState};
use crate::error::{Error, Result};
use crate::transport::write::{is_stale_route, Target};
use crate::transport::Connection;

/// The held locks whose names match a pattern, from
/// [`LockClient::scan`](crate::LockClient::scan): `SCAN ... COUNT n TYPE hash` on each
/// master in turn (never `KEYS`), each page's locks read in one write. Hashes that are not
/// locks are skipped. Then, in a second pass, the semaphores with expiring permits, found by
/// their permit lists (`SCAN MATCH {pattern}:timeout TYPE zset`; a name with braces of its
/// own is not found so, nor is a bare count: `inspect` those by name). A lock created or
/// freed while the scan runs may or may not be seen, as with `SCAN` itself.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let mut scan = client.scan("orders:*");
/// while let Some(info) = scan.next().await {
///     let info = info?;
///     println!("{} held by {} owner(s)", info.name, info.holders.len());
/// }
/// # Ok(()) }
/// ```
pub struct Scan {
    conn: Connection,
    prefix: String,
    key_pattern: String,
    count: usize,
    nodes: Vec<Target>,
    node: usize,
    /// The cursor on the current node (`None` before its first `SCAN`).
    cursor: Option<u64>,
    buffered: VecDeque<LockInfo>,
    /// The named clients, read once per scan.
    clients: Option<HashMap<String, ClientName>>,
    /// Keys whose layout was read (one script call each).
    keys_read: u64,
}

impl Scan {
    /// Keys examined per `SCAN` call by default (Redis's own default is 10).
    pub const DEFAULT_COUNT: usize = 100;

    pub(crate) fn new(conn: Connection, prefix: &str, pattern: &str) -> Scan {
        let nodes = conn.masters();
        Scan {
            conn,
            prefix: prefix.to_string(),
            key_pattern: format!("{}{pattern}", escape_glob(prefix)),
            count: Scan::DEFAULT_COUNT,
            nodes,
            node: 0,
            cursor: None,
            buffered: VecDeque::new(),
            clients: None,
            keys_read: 0,
        }
    }

    /// Examine about `count` keys per `SCAN` call (the server's work per call).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) {
    /// let scan = client.scan("*").with_count(500);
    /// # }
    /// ```
    pub fn with_count(mut self, count: usize) -> Scan {
        self.count = count.max(1);
        self
    }

    /// How many keys this scan has read so far, each with one script call (a view that
    /// shows the servers' script rate subtracts its own).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) {
    /// let mut scan = client.scan("*");
    /// while scan.next_page().await.is_some() {}
    /// println!("{} keys read", scan.keys_read());
    /// # }
    /// ```
    pub fn keys_read(&self) -> u64 {
        self.keys_read
    }

    /// The next lock, `None` once every master has been scanned.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a page being read when the future is dropped is lost to this scan.
    pub async fn next(&mut self) -> Option<Result<LockInfo>> {
        loop {
            if let Some(info) = self.buffered.pop_front() {
                return Some(Ok(info));
            }
            match self.next_page().await? {
                Ok(page) => self.buffered.extend(page),
                Err(err) => return Some(Err(err)),
            }
        }
    }

    /// After `target` could not be reached where the view put it (a failover, a node gone or
    /// not connected): reads the cluster's slot map again and, if `target` is no longer a
    /// master there, scans in its place, from the start, the masters this scan did not know
    /// (its promoted replica). `false` when there is nothing to retry: no cluster, the map
    /// could not be read, or `target` is still a master (the error stands).
    async fn retarget(&mut self, target: &Target) -> bool {
        let Some(topology) = self.conn.topology().cloned() else {
            return false;
        };
        if topology.refreshed().await.is_err() {
            return false;
        }
        let masters = self.conn.masters();
        if masters.contains(target) {
            return false;
        }
        let new: Vec<Target> = (masters.into_iter())
            .filter(|m| !self.nodes.contains(m))
            .collect();
        if new.is_empty() && self.nodes.len() == 1 {
            return false;
        }
        // (`node` counts over the list twice, one pass per kind of key: it keeps its place
        // in its pass.)
        let (before, place) = (self.nodes.len(), self.node % self.nodes.len());
        let second = self.node >= before;
        self.nodes.splice(place..=place, new);
        self.node = place + if second { self.nodes.len() } else { 0 };
        self.cursor = None;
        true
    }

    /// The locks of the next `SCAN` call (possibly none), `None` once every master has
    /// been scanned: one `SCAN` and one write of reads, a bounded amount of work.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, as [`Scan::next`].
    pub async fn next_page(&mut self) -> Option<Result<Vec<LockInfo>>> {
        // Two passes over the masters: the locks' hashes, then the permit lists of the
        // semaphores with expiring permits (`{key}:timeout` zsets: their count is a bare
        // string, which a scan cannot tell from any other).
        let masters = self.nodes.len();
        if self.node >= 2 * masters {
            return None;
        }
        let target = self.nodes[self.node % masters].clone();
        let permits = self.node >= masters;
        if self.clients.is_none() {
            self.clients = Some(client_names(&self.conn).await);
        }
        let mut scan = redis::cmd("SCAN");
        let (pattern, kind) = match permits {
            false => (self.key_pattern.clone(), "hash"),
            true => (format!("{{{}}}:timeout", self.key_pattern), "zset"),
        };
        (scan.arg(self.cursor.unwrap_or(0)))
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(self.count)
            .arg("TYPE")
            .arg(kind);
        let reply = self.conn.send_to_node(&target, &scan).await;
        let (cursor, keys): (u64, Vec<String>) =
            match reply.and_then(|r| Ok(redis::from_redis_value(r)?)) {
                Ok(page) => page,
                Err(err) if is_stale_route(&err) && self.retarget(&target).await => {
                    return Some(Ok(Vec::new()));
                }
                Err(err) => return Some(Err(Error::Redis(err))),
            };
        if cursor == 0 {
            (self.node, self.cursor) = (self.node + 1, None);
        } else {
            self.cursor = Some(cursor);
        }
        let locks: Vec<(String, String)> = (keys.into_iter())
            .filter_map(|key| match permits {
                false => Some(key),
                true => Some(
                    key.strip_prefix('{')?
                        .strip_suffix("}:timeout")?
                        .to_string(),
                ),
            })
            .filter_map(|key| Some((key.strip_prefix(&self.prefix)?.to_string(), key)))
            .collect();
        self.keys_read += locks.len() as u64;
        let clients = self.clients.as_ref().expect("read above");
        Some(
            read_page(&self.conn, &target, &locks, clients)
                .await
                .map(|page| page.into_iter().filter(is_lock).collect()),
        )
    }
}

/// A held hash laid out as a lock (a `mode` field, or every field an owner's), or a
/// semaphore with expiring permits (a count with its permits listed beside it). A bare count
/// (an `RSemaphore`, an `RCountDownLatch`) is any integer string to a scan, so it is left out:
/// `inspect` it by name.
fn is_lock(info: &LockInfo) -> bool {
    match info.state {
        LockState::Held => {
            info.mode.is_some()
                || (!info.holders.is_empty() && info.holders.iter().all(|h| h.client_id.is_some()))
        }
        LockState::Count => info.kind == Some(LockKind::PermitSemaphore),
        _ => false,
    }
}

/// `s` with glob's special characters escaped, to match itself in `SCAN MATCH`.
fn escape_glob(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_prefix_matches_itself() {
        assert_eq!(super::escape_glob("app:*[x]?"), "app:\\*\\[x\\]\\?");
    }
}
