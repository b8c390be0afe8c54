//! The demo's own `redis-server`: a free loopback port, a scratch directory, no persistence,
//! stopped and cleaned up on drop (so on errors and Ctrl-C too).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::failure::{self, Failure};
use crate::process;

/// A running `redis-server`, killed and its directory removed when dropped.
pub struct DemoServer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl DemoServer {
    /// Starts `redis-server` from PATH on a free port and waits until it answers `PING`.
    pub fn start() -> Result<Self, Failure> {
        let dir = std::env::temp_dir().join(format!(
            "rlock-demo-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| {
            Failure::new(
                failure::FAILURE,
                format!("cannot create {}: {e}", dir.display()),
            )
        })?;
        let mut last_error = String::new();
        // A port seen free may be taken before the server binds it: try a few.
        for _ in 0..5 {
            let port = free_port()?;
            match spawn(&dir, port) {
                Ok(mut child) => match wait_ready(&mut child, port) {
                    Ok(()) => return Ok(DemoServer { child, dir, port }),
                    Err(err) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        last_error = err;
                    }
                },
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(Failure::new(
                        failure::FAILURE,
                        "the demo needs redis-server on PATH: install it (e.g. `apt-get install redis-server`)",
                    ));
                }
                Err(err) => last_error = format!("cannot start redis-server: {err}"),
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        Err(Failure::new(failure::FAILURE, last_error))
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits until the server on `port` answers `PING` (at most 10 s).
fn wait_ready(child: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}")).map_err(|e| e.to_string())?;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "redis-server exited at start ({status}); port {port} taken?"
            ));
        }
        if let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) {
            if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err("redis-server did not answer PING within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn free_port() -> Result<u16, Failure> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Failure::new(failure::FAILURE, format!("no free loopback port: {e}")))
}

fn spawn(dir: &std::path::Path, port: u16) -> std::io::Result<Child> {
    let mut command = Command::new("redis-server");
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        // Keyspace events: a holder hears a raw DEL at once (scene 4).
        .args(["--notify-keyspace-events", "Kgxe"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // If rlock is killed outright, the server goes with it.
    process::die_with_parent(&mut command);
    command.spawn()
}
