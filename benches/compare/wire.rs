//! The wire's floor: what an uncontended lock + unlock costs a client that does nothing else.
//! One thread, a `std::net::TcpStream` (or `UnixStream`), read blocking or spinning, no
//! pipelining across the pair: the crate's own acquire and unlock scripts (`EVALSHA`, the same
//! keys and arguments as the floor's, publishing with the topology's command), written as RESP
//! by hand, each reply read before the next call. Where the
//! master has a replica, each script carries `WAIT 1 1000` in the same write, as every other
//! client here does. Spent latches are left to their `PX` (the crate deletes them in batched
//! sweeps, off the caller's path). [`latch_cost_wire`] does the same with the semaphores'
//! scripts, with and without their latches.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use redis::Script;

use crate::floor::WAIT_MS;
use crate::p4::cpu_time;
use crate::stats::p50_p99_us;

const ACQUIRE: &str = include_str!("../../scripts/lua/acquire.lua");
const UNLOCK: &str = include_str!("../../scripts/lua/unlock.lua");
const SEM_ACQUIRE: &str = include_str!("../../scripts/lua/semaphore_acquire.lua");
const SEM_RELEASE: &str = include_str!("../../scripts/lua/semaphore_release.lua");
/// The semaphore's acquire with no latch: what Redisson's sends (check, then `DECRBY`). Same
/// keys and arguments as the crate's; the latch is not touched.
const SEM_ACQUIRE_UNLATCHED: &str = "\
local value = redis.call('get', KEYS[1])
if value and tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return nil
end
return -1";
/// The semaphore's release with no latch: what Redisson's sends (`INCRBY`, then the count
/// published). Same keys and arguments as the crate's; the latch is not touched.
const SEM_RELEASE_UNLATCHED: &str = "\
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
return value";
const PERMIT_ACQUIRE: &str = include_str!("../../scripts/lua/permit_acquire.lua");
const PERMIT_RELEASE: &str = include_str!("../../scripts/lua/permit_release.lua");
/// The expirable semaphore's acquire with no latch: what Redisson's sends (expired permits
/// given back, then check, `DECRBY` and the id listed with its expiry). Same keys and
/// arguments as the crate's; the latch is not touched.
const PERMIT_ACQUIRE_UNLATCHED: &str = "\
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, 1)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    redis.call(ARGV[4], KEYS[3], value)
end
local value = redis.call('get', KEYS[1])
if value and tonumber(value) >= 1 then
    redis.call('decrby', KEYS[1], 1)
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return nil
end
return -1";
/// The expirable semaphore's release with no latch: what Redisson's sends (the id taken out,
/// then `INCRBY` and the count published). Same keys and arguments as the crate's; the latch
/// is not touched.
const PERMIT_RELEASE_UNLATCHED: &str = "\
if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then
    return 0
end
local value = redis.call('incrby', KEYS[1], 1)
redis.call(ARGV[3], KEYS[3], value)
return 1";
/// Redisson's expiry score of a permit that never expires.
const NEVER_EXPIRES: &str = "922337203685477";
const LEASE_MS: u64 = 30_000;
const LATCH_PX_MS: u64 = 20_000;
const FIELD: &str = "00000000-0000-4000-8000-00000000000f:1";
/// P1's key (the crate's and the floor's too).
const KEY: &str = "bench:p1";

/// A byte stream to the server: TCP or a Unix socket.
trait Wire: Read + Write {}
impl Wire for TcpStream {}
impl Wire for UnixStream {}

/// `(p50 µs, p99 µs, client CPU µs per pair)` of `iters` pairs on P1's key at `url`
/// (`redis://host:port` or `redis+unix:///path`), after `warmup` pairs. Runs on the caller's
/// thread. `spin`: the socket is non-blocking and a read is retried at once until bytes come,
/// so the thread never sleeps between a request and its reply (the difference between the two
/// is the wake-up of a thread asleep in `read`).
pub(crate) fn p1_wire(
    url: &str,
    publish: &str,
    wait: bool,
    spin: bool,
    warmup: usize,
    iters: usize,
) -> (f64, f64, f64) {
    let mut conn = Conn::connect(url, spin);
    let (acquire, unlock) = (Script::new(ACQUIRE), Script::new(UNLOCK));
    for code in [ACQUIRE, UNLOCK] {
        conn.call(&[b"SCRIPT", b"LOAD", code.as_bytes()], false);
    }
    let key = KEY;
    let channel = format!("redisson_lock__channel:{{{key}}}");
    let (lease, px) = (LEASE_MS.to_string(), LATCH_PX_MS.to_string());
    let mut seq = 0u64;
    let mut pair = |conn: &mut Conn| {
        seq += 1;
        let latch = format!("redisson_lock_acquire_latch:{{{key}}}:{seq:032x}");
        let reply = conn.call(
            &[
                b"EVALSHA",
                acquire.get_hash().as_bytes(),
                b"2",
                key.as_bytes(),
                latch.as_bytes(),
                lease.as_bytes(),
                FIELD.as_bytes(),
                px.as_bytes(),
            ],
            wait,
        );
        assert_eq!(reply, Reply::Nil, "wire: the lock is free");
        let latch = format!("redisson_unlock_latch:{{{key}}}:{seq:032x}");
        let reply = conn.call(
            &[
                b"EVALSHA",
                unlock.get_hash().as_bytes(),
                b"3",
                key.as_bytes(),
                channel.as_bytes(),
                latch.as_bytes(),
                b"0",
                lease.as_bytes(),
                FIELD.as_bytes(),
                publish.as_bytes(),
                px.as_bytes(),
            ],
            wait,
        );
        assert!(matches!(reply, Reply::Int(_)), "wire: unlocked");
    };
    for _ in 0..warmup {
        pair(&mut conn);
    }
    let mut lat = Vec::with_capacity(iters);
    let cpu0 = cpu_time();
    for _ in 0..iters {
        let t = Instant::now();
        pair(&mut conn);
        lat.push(t.elapsed().as_nanos() as u64);
    }
    let cpu = (cpu_time() - cpu0).as_secs_f64() * 1e6 / iters as f64;
    let (p50, p99) = p50_p99_us(lat);
    (p50, p99, cpu)
}

/// A synchronizer whose scripts latch each command (exactly-once), for [`latch_cost_wire`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Latched {
    /// `RSemaphore`: one permit of a semaphore of one.
    Semaphore,
    /// `RPermitExpirableSemaphore`: one permit (its id), of one, a lease of an hour.
    Permit,
}

impl Latched {
    /// Both kinds, in the order their rows print.
    pub(crate) const ALL: [Latched; 2] = [Latched::Semaphore, Latched::Permit];

    /// The bench's name of the kind (its `p1.<kind>` rows).
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Latched::Semaphore => "semaphore",
            Latched::Permit => "permit",
        }
    }

    /// The results' metric of its wire rows.
    pub(crate) fn metric(self) -> &'static str {
        match self {
            Latched::Semaphore => "p1semwire",
            Latched::Permit => "p1permwire",
        }
    }

    /// Its acquire and release scripts: the crate's (latched), then Redisson's commands with
    /// the same keys and arguments and no latch.
    fn scripts(self) -> [&'static str; 4] {
        match self {
            Latched::Semaphore => [
                SEM_ACQUIRE,
                SEM_RELEASE,
                SEM_ACQUIRE_UNLATCHED,
                SEM_RELEASE_UNLATCHED,
            ],
            Latched::Permit => [
                PERMIT_ACQUIRE,
                PERMIT_RELEASE,
                PERMIT_ACQUIRE_UNLATCHED,
                PERMIT_RELEASE_UNLATCHED,
            ],
        }
    }
}

/// What exactly-once costs a semaphore `kind` on the wire: `[(p50 µs, p99 µs); 2]` of `iters`
/// acquire + release pairs of one permit on P1's key at `url` (blocking reads), first with
/// the crate's scripts (a latch written beside the key by each acquire and each release, so
/// that a re-sent command counts once), then with the same commands on the key and none on a
/// latch (what Redisson sends: a retried command can take or give twice). The two alternate
/// pair by pair, so that both see the same machine.
pub(crate) fn latch_cost_wire(
    kind: Latched,
    url: &str,
    publish: &str,
    wait: bool,
    warmup: usize,
    iters: usize,
) -> [(f64, f64); 2] {
    let mut conn = Conn::connect(url, false);
    let [acquire, release, acquire_bare, release_bare] = kind.scripts();
    let latched = (Script::new(acquire), Script::new(release));
    let unlatched = (Script::new(acquire_bare), Script::new(release_bare));
    for code in kind.scripts() {
        conn.call(&[b"SCRIPT", b"LOAD", code.as_bytes()], false);
    }
    let key = KEY;
    conn.call(&[b"SET", key.as_bytes(), b"1"], wait);
    let channel = format!("redisson_sc:{{{key}}}");
    let timeouts = format!("{{{key}}}:timeout");
    let (acquire_px, release_px) = ("3600000", LATCH_PX_MS.to_string());
    let permit_id = [0x5au8; 16];
    let mut seq = 0u64;
    let mut pair = |conn: &mut Conn, (acquire, release): &(Script, Script)| {
        seq += 1;
        let take_latch = format!("redisson_lock_acquire_latch:{{{key}}}:{seq:032x}");
        let give_latch = format!("redisson_unlock_latch:{{{key}}}:{seq:032x}");
        let (take, give) = (acquire.get_hash().as_bytes(), release.get_hash().as_bytes());
        match kind {
            Latched::Semaphore => {
                let take: [&[u8]; 7] = [
                    b"EVALSHA",
                    take,
                    b"2",
                    key.as_bytes(),
                    take_latch.as_bytes(),
                    b"1",
                    acquire_px.as_bytes(),
                ];
                assert_eq!(conn.call(&take, wait), Reply::Nil, "wire: a permit taken");
                let give: [&[u8]; 10] = [
                    b"EVALSHA",
                    give,
                    b"3",
                    key.as_bytes(),
                    channel.as_bytes(),
                    give_latch.as_bytes(),
                    b"1",
                    publish.as_bytes(),
                    release_px.as_bytes(),
                    b"0",
                ];
                assert_eq!(conn.call(&give, wait), Reply::Int(1), "wire: given back");
            }
            Latched::Permit => {
                let now = now_ms();
                let (now, expiry) = (now.to_string(), (now + 3_600_000).to_string());
                let take: [&[u8]; 13] = [
                    b"EVALSHA",
                    take,
                    b"4",
                    key.as_bytes(),
                    timeouts.as_bytes(),
                    channel.as_bytes(),
                    take_latch.as_bytes(),
                    &permit_id,
                    expiry.as_bytes(),
                    now.as_bytes(),
                    publish.as_bytes(),
                    NEVER_EXPIRES.as_bytes(),
                    acquire_px.as_bytes(),
                ];
                assert_eq!(conn.call(&take, wait), Reply::Nil, "wire: a permit taken");
                let give: [&[u8]; 11] = [
                    b"EVALSHA",
                    give,
                    b"4",
                    key.as_bytes(),
                    timeouts.as_bytes(),
                    channel.as_bytes(),
                    give_latch.as_bytes(),
                    &permit_id,
                    now.as_bytes(),
                    publish.as_bytes(),
                    release_px.as_bytes(),
                ];
                assert_eq!(conn.call(&give, wait), Reply::Int(1), "wire: given back");
            }
        }
    };
    for _ in 0..warmup {
        pair(&mut conn, &latched);
        pair(&mut conn, &unlatched);
    }
    let mut lat = [Vec::with_capacity(iters), Vec::with_capacity(iters)];
    for _ in 0..iters {
        for (scripts, lat) in [&latched, &unlatched].into_iter().zip(lat.iter_mut()) {
            let t = Instant::now();
            pair(&mut conn, scripts);
            lat.push(t.elapsed().as_nanos() as u64);
        }
    }
    lat.map(p50_p99_us)
}

/// Milliseconds since the epoch, by this machine's clock (the permits' expiry scores).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A reply, as far as the pair needs it.
#[derive(Debug, PartialEq)]
enum Reply {
    Nil,
    Int(i64),
    Other,
}

struct Conn {
    stream: Box<dyn Wire>,
    /// Bytes read and not yet parsed: `buf[at..]`.
    buf: Vec<u8>,
    at: usize,
    out: Vec<u8>,
}

impl Conn {
    /// A connection to `url` (`redis://host:port` or `redis+unix:///path`); `spin`: a
    /// non-blocking socket, read in a loop.
    fn connect(url: &str, spin: bool) -> Conn {
        let stream: Box<dyn Wire> = match url
            .strip_prefix("redis+unix://")
            .or_else(|| url.strip_prefix("unix://"))
        {
            Some(path) => {
                let unix = UnixStream::connect(path).expect("wire: connect the socket");
                unix.set_nonblocking(spin).unwrap();
                Box::new(unix)
            }
            None => {
                let addr = url.trim_start_matches("redis://").trim_end_matches('/');
                let tcp = TcpStream::connect(addr).expect("wire: connect");
                tcp.set_nodelay(true).unwrap();
                tcp.set_nonblocking(spin).unwrap();
                Box::new(tcp)
            }
        };
        Conn {
            stream,
            buf: Vec::with_capacity(4096),
            at: 0,
            out: Vec::with_capacity(512),
        }
    }

    /// Writes `args` as one command (and `WAIT 1 1000` behind it in the same write when
    /// `wait`), reads the replies: the command's.
    fn call(&mut self, args: &[&[u8]], wait: bool) -> Reply {
        self.out.clear();
        encode(&mut self.out, args);
        if wait {
            encode(
                &mut self.out,
                &[b"WAIT", b"1", WAIT_MS.to_string().as_bytes()],
            );
        }
        self.stream.write_all(&self.out).expect("wire: write");
        let reply = self.read();
        if wait {
            self.read();
        }
        reply
    }

    /// More bytes from the socket: a blocking read, or, on a non-blocking socket (`spin`),
    /// reads retried at once until bytes come.
    fn fill(&mut self) {
        if self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        }
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("wire: the server closed the connection"),
                Ok(n) => return self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => panic!("wire: read: {e}"),
            }
        }
    }

    /// The next line, without its `\r\n`.
    fn line(&mut self) -> String {
        loop {
            if let Some(end) = self.buf[self.at..].windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[self.at..self.at + end]).into_owned();
                self.at += end + 2;
                return line;
            }
            self.fill();
        }
    }

    fn read(&mut self) -> Reply {
        let line = self.line();
        let (kind, rest) = line.split_at(1);
        match kind {
            ":" => Reply::Int(rest.parse().expect("wire: an integer")),
            "_" => Reply::Nil,
            "$" if rest == "-1" => Reply::Nil,
            "$" => {
                let len: usize = rest.parse().expect("wire: a length");
                while self.buf.len() - self.at < len + 2 {
                    self.fill();
                }
                self.at += len + 2;
                Reply::Other
            }
            "+" => Reply::Other,
            "-" => panic!("wire: the server answered {line}"),
            other => panic!("wire: unexpected reply type {other}"),
        }
    }
}

fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}
