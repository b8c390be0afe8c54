//! Commands a server ran, told apart by the connection that sent them (`MONITOR`).
//!
//! `INFO commandstats` counts every client's calls together: a test that counts one client's
//! writes at a server also counts whatever else writes there meanwhile (a held lock's renewals,
//! another client). A [`Monitor`] logs each command with its connection's address; [`count`]
//! keeps those of connections whose `CLIENT SETNAME` name contains a given part (a client's
//! service name: [`Config::with_service_name`](redisson_lock::Config::with_service_name)).
//!
//! [`count`]: Monitor::count

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `MONITOR` connection to one server, logging `(address, command)` in the server's order.
pub struct Monitor {
    port: u16,
    log: Arc<Mutex<Vec<(String, String)>>>,
    stream: TcpStream,
}

impl Monitor {
    /// Starts logging what the server on `port` runs from now on.
    pub fn start(port: u16) -> Monitor {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect for MONITOR");
        stream.write_all(b"MONITOR\r\n").unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut ok = String::new();
        reader.read_line(&mut ok).unwrap();
        assert_eq!(ok.trim_end(), "+OK", "MONITOR refused");
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                if let Some(entry) = parse(&line) {
                    sink.lock().unwrap().push(entry);
                }
                line.clear();
            }
        });
        Monitor { port, log, stream }
    }

    /// Waits until the log holds every command the server ran before this call: a marker
    /// sent afterwards on another connection comes back through `MONITOR` after them.
    pub fn sync(&self) {
        let marker = format!("monitor-sync-{}", uuid_like());
        let _: String = redis::cmd("ECHO")
            .arg(&marker)
            .query(&mut self.conn())
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let quoted = format!("\"{marker}\"");
        while !self
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|(_, cmd)| cmd.contains(&quoted))
        {
            assert!(Instant::now() < deadline, "MONITOR never showed the marker");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// How many `command`s (any case) the connections named with `name_part` sent since the
    /// monitor started or was last [`clear`](Monitor::clear)ed, as of [`sync`](Monitor::sync).
    pub fn count(&self, command: &str, name_part: &str) -> usize {
        self.sync();
        let addrs = self.addresses(name_part);
        assert!(
            !addrs.is_empty(),
            "no connection is named with {name_part:?}"
        );
        let wanted = format!("\"{}\"", command.to_ascii_lowercase());
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(addr, cmd)| {
                addrs.contains(addr) && cmd.split(' ').next() == Some(wanted.as_str())
            })
            .count()
    }

    /// The arguments after the SHA of each `EVALSHA` of `scripts/lua/<script>.lua` the
    /// connections named with `name_part` sent (as [`count`](Monitor::count) counts), quoted
    /// as `MONITOR` shows them: a call's keys and arguments.
    pub fn script_calls(&self, script: &str, name_part: &str) -> Vec<Vec<String>> {
        self.sync();
        let addrs = self.addresses(name_part);
        let sha = format!("\"{}\"", super::script_sha(script));
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(addr, _)| addrs.contains(addr))
            .filter_map(|(_, cmd)| {
                let mut words = cmd.split(' ');
                (words.next() == Some("\"evalsha\"") && words.next() == Some(sha.as_str()))
                    .then(|| words.map(str::to_owned).collect())
            })
            .collect()
    }

    /// How many holds the loss watch checked (`held_across.lua`, a key and a field each), from
    /// the connections named with `name_part`.
    pub fn holds_checked(&self, name_part: &str) -> usize {
        let calls = self.script_calls("held_across", name_part);
        calls.iter().map(|args| (args.len() - 1) / 2).sum()
    }

    /// Forgets what was logged so far (after a [`sync`](Monitor::sync)).
    pub fn clear(&self) {
        self.sync();
        self.log.lock().unwrap().clear();
    }

    /// A plain connection to the monitored server (the test's own: never counted).
    fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Addresses of the connections whose name contains `name_part` (`CLIENT LIST`).
    fn addresses(&self, name_part: &str) -> HashSet<String> {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut self.conn())
            .unwrap();
        list.lines()
            .filter(|l| {
                l.split(' ').any(|f| {
                    f.strip_prefix("name=")
                        .is_some_and(|n| n.contains(name_part))
                })
            })
            .filter_map(|l| {
                l.split(' ')
                    .find_map(|f| f.strip_prefix("addr="))
                    .map(str::to_owned)
            })
            .collect()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// `+1700000000.123456 [0 127.0.0.1:5555] "WAIT" "1" "1000"` → (`127.0.0.1:5555`,
/// `"wait" "1" "1000"`), the command's name lowercased. Lines from scripts (`[0 lua]`) have
/// no address and are kept under `lua`.
fn parse(line: &str) -> Option<(String, String)> {
    let open = line.find('[')?;
    let close = open + line[open..].find(']')?;
    let addr = line[open + 1..close].split(' ').nth(1)?.to_owned();
    let rest = line[close + 1..].trim();
    let (name, args) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((addr, format!("{} {args}", name.to_ascii_lowercase())))
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
