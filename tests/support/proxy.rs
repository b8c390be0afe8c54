//! A fault proxy: a TCP relay between the clients under test and a `redis-server`, which can
//! cut a connection right after the server answered a chosen command (the answer is never
//! forwarded: the command ran, the client never learns it did), cut every connection at once,
//! or delay traffic.
//!
//! The relay parses RESP frames in both directions just enough to pair each reply with its
//! command (commands in order; RESP3 push frames are not replies and always pass).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A relay listening on a free loopback port, forwarding to `127.0.0.1:<upstream>`. Every
/// connection is cut when the proxy is dropped.
pub struct Proxy {
    port: u16,
    state: Arc<State>,
    shutdown: CancellationToken,
}

#[derive(Default)]
struct State {
    rules: Mutex<Vec<Rule>>,
    delay: Mutex<Duration>,
    /// One token per live connection; cancelling it closes both sides.
    conns: Mutex<Vec<CancellationToken>>,
    cuts: AtomicUsize,
    accepted: AtomicUsize,
}

/// Cut after the reply to the next `times` commands containing every one of `patterns`.
struct Rule {
    patterns: Vec<Vec<u8>>,
    times: usize,
}

impl Proxy {
    /// Starts the relay on the current tokio runtime.
    pub async fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State::default());
        let shutdown = CancellationToken::new();
        let (st, stop) = (state.clone(), shutdown.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((client, _)) = accepted else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                st.accepted.fetch_add(1, Ordering::SeqCst);
                let token = stop.child_token();
                st.conns.lock().push(token.clone());
                tokio::spawn(relay(st.clone(), client, server, token));
            }
        });
        Proxy {
            port,
            state,
            shutdown,
        }
    }

    /// `redis://127.0.0.1:<proxy port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Arms a fault: the next `times` commands whose bytes contain every one of `patterns`
    /// run on the server, and the connection that carried each is cut right after the server
    /// answered, before the answer is forwarded.
    pub fn cut_after_reply(&self, patterns: &[&str], times: usize) {
        self.state.rules.lock().push(Rule {
            patterns: patterns.iter().map(|p| p.as_bytes().to_vec()).collect(),
            times,
        });
    }

    /// Takes back every fault armed by [`Proxy::cut_after_reply`] and not yet used.
    pub fn disarm(&self) {
        self.state.rules.lock().clear();
    }

    /// Faults armed by [`Proxy::cut_after_reply`] and not yet used.
    pub fn armed(&self) -> usize {
        self.state.rules.lock().iter().map(|r| r.times).sum()
    }

    /// Connections cut so far by [`Proxy::cut_after_reply`] faults.
    pub fn cuts(&self) -> usize {
        self.state.cuts.load(Ordering::SeqCst)
    }

    /// Connections accepted so far (a client that reconnects shows up here).
    pub fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// Cuts every connection open now (new ones are accepted as usual).
    pub fn cut_all(&self) {
        for token in self.state.conns.lock().drain(..) {
            token.cancel();
        }
    }

    /// Delays every chunk forwarded from now on, in both directions, by `delay`.
    pub fn set_delay(&self, delay: Duration) {
        *self.state.delay.lock() = delay;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Commands whose RESP3 answers are push frames, not replies: they take no place in line.
const PUSH_ANSWERED: &[&[u8]] = &[
    b"SUBSCRIBE",
    b"SSUBSCRIBE",
    b"PSUBSCRIBE",
    b"UNSUBSCRIBE",
    b"SUNSUBSCRIBE",
    b"PUNSUBSCRIBE",
];

async fn relay(state: Arc<State>, client: TcpStream, server: TcpStream, token: CancellationToken) {
    let (client_rd, client_wr) = client.into_split();
    let (server_rd, server_wr) = server.into_split();
    // For each command sent and not answered yet: cut after its reply?
    let line: Line = Arc::default();
    tokio::select! {
        _ = token.cancelled() => {}
        _ = upstream(&state, &line, client_rd, server_wr) => {}
        _ = downstream(&state, &line, server_rd, client_wr) => {}
    }
    // Both halves are dropped here: the client sees its connection closed.
}

type Line = Arc<Mutex<VecDeque<bool>>>;

/// Client to server: every command is noted in `line` (does its reply cut the connection?).
async fn upstream(state: &State, line: &Line, from: OwnedReadHalf, to: OwnedWriteHalf) {
    forward_frames(state, from, to, |frame| {
        if !is_push_answered(frame) {
            line.lock().push_back(state.take_rule(frame));
        }
        false
    })
    .await;
}

/// Server to client: stops (cutting the connection) before forwarding a reply whose command
/// armed a cut. Push frames are not replies.
async fn downstream(state: &State, line: &Line, from: OwnedReadHalf, to: OwnedWriteHalf) {
    let cut = forward_frames(state, from, to, |frame| {
        frame[0] != b'>' && line.lock().pop_front() == Some(true)
    })
    .await;
    if cut {
        state.cuts.fetch_add(1, Ordering::SeqCst);
    }
}

/// Forwards complete RESP frames, a read's worth at a time, until the connection ends (then
/// `false`) or `cut_before` picks a frame: everything before it is forwarded, it and the rest
/// are not (then `true`).
async fn forward_frames(
    state: &State,
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut cut_before: impl FnMut(&[u8]) -> bool,
) -> bool {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let Some(n) = from.read(&mut chunk).await.ok().filter(|&n| n > 0) else {
            return false;
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut complete = 0;
        let mut cut = false;
        while let Some(len) = frame_len(&buf[complete..]) {
            if cut_before(&buf[complete..complete + len]) {
                cut = true;
                break;
            }
            complete += len;
        }
        state.pause().await;
        if to.write_all(&buf[..complete]).await.is_err() {
            return false;
        }
        if cut {
            return true;
        }
        buf.drain(..complete);
    }
}

impl State {
    async fn pause(&self) {
        let delay = *self.delay.lock();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    }

    /// Whether `command` uses up an armed rule.
    fn take_rule(&self, command: &[u8]) -> bool {
        let mut rules = self.rules.lock();
        let hit = rules.iter_mut().find(|r| {
            r.times > 0
                && r.patterns
                    .iter()
                    .all(|p| command.windows(p.len()).any(|w| w == p.as_slice()))
        });
        match hit {
            Some(rule) => {
                rule.times -= 1;
                true
            }
            None => false,
        }
    }
}

/// Whether a command frame is one whose answer comes as a push (its name, upper-cased).
fn is_push_answered(frame: &[u8]) -> bool {
    // *<n>\r\n$<len>\r\n<name>\r\n...
    let mut parts = frame.split(|&b| b == b'\n');
    let (Some(_), Some(_), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let name = name
        .strip_suffix(b"\r")
        .unwrap_or(name)
        .to_ascii_uppercase();
    PUSH_ANSWERED.contains(&name.as_slice())
}

/// The length of the complete RESP2/RESP3 frame at the start of `buf`, or `None` if it is not
/// all there yet.
fn frame_len(buf: &[u8]) -> Option<usize> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let header = std::str::from_utf8(&buf[1..line_end]).ok()?;
    let head = line_end + 2;
    match *buf.first()? {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(head),
        b'$' | b'=' | b'!' => {
            let len: i64 = header.parse().ok()?;
            if len < 0 {
                return Some(head);
            }
            let end = head + len as usize + 2;
            (buf.len() >= end).then_some(end)
        }
        kind @ (b'*' | b'~' | b'>' | b'%' | b'|') => {
            let count: i64 = header.parse().ok()?;
            if count < 0 {
                return Some(head);
            }
            let items = if matches!(kind, b'%' | b'|') {
                2 * count
            } else {
                count
            };
            let mut at = head;
            for _ in 0..items {
                at += frame_len(&buf[at..])?;
            }
            if kind == b'|' {
                // An attribute map precedes the frame it describes.
                at += frame_len(&buf[at..])?;
            }
            Some(at)
        }
        // An inline command (not sent by redis-rs): one line.
        _ => Some(head),
    }
}
