//! `rlock top`: one pass as JSON lines and as a table (`--once`), and the live view driven in
//! a real terminal, `tmux` (send-keys, capture-pane): it shows the locks, sorts on a key, and
//! `q` quits with the terminal restored.

use std::process::Command;
use std::time::{Duration, Instant};

use redisson_lock::Owner;
use serde_json::Value;

use super::support::{self, RedisServer};
use super::{output, rlock, PROMPT};

/// Locks of three kinds held by one client (service `top-test`), one of them waited on by a
/// task of another client.
struct Held {
    holder: redisson_lock::LockClient,
    waiter: redisson_lock::LockClient,
    guards: Vec<redisson_lock::LockGuard>,
    fenced: redisson_lock::FencedGuard,
    waiting: tokio::task::JoinHandle<redisson_lock::LockGuard>,
}

async fn hold(server: &RedisServer, prefix: &str) -> Held {
    let holder = server
        .client_with(|c| c.with_service_name("top-test"))
        .await;
    let waiter = server.client().await;
    let plain = holder.lock(format!("{prefix}plain")).lock().await.unwrap();
    let read = (holder.read_write_lock(format!("{prefix}rw")).read_lock())
        .with_owner(Owner::new())
        .lock()
        .await
        .unwrap();
    let fenced = holder
        .fenced_lock(format!("{prefix}fenced"))
        .lock()
        .await
        .unwrap();
    let waiting = support::spawn_waiter(&waiter, &format!("{prefix}plain"));
    server
        .until_subscribers(&support::channel(&format!("{prefix}plain")), 1)
        .await;
    Held {
        holder,
        waiter,
        guards: vec![plain, read],
        fenced,
        waiting,
    }
}

impl Held {
    async fn release(self) {
        drop(self.fenced);
        for guard in self.guards {
            guard.unlock().await.unwrap();
        }
        self.waiting.await.unwrap().unlock().await.unwrap();
        self.holder.shutdown().await;
        self.waiter.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_once_json_lists_every_held_lock_with_its_named_holder_and_waiters() {
    let server = RedisServer::start();
    let held = hold(&server, "topj:").await;
    let _: () = server.cmd(&["HSET", "topj:not-a-lock", "a", "b"]);
    let mut cmd = rlock(&server);
    cmd.args(["top", "topj:*", "--once", "--json", "--sort", "name"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || output(cmd))
        .await
        .unwrap();
    assert!(status.success(), "{stderr}");
    let locks: Vec<Value> = (stdout.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = locks.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["topj:fenced", "topj:plain", "topj:rw"], "{stdout}");
    let kinds: Vec<&str> = locks.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["fenced", "lock", "read_write"]);
    assert_eq!(locks[0]["fencing_token"], held.fenced.token());
    assert_eq!(locks[1]["waiters"], 1);
    let client = &locks[1]["owners"][0]["client"];
    assert_eq!(client["service"], "top-test");
    assert_eq!(client["pid"], std::process::id());
    held.release().await;
}

/// A tmux server of its own (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str) -> Option<Tmux> {
        let socket = format!("rlock-top-{}", std::process::id());
        let started = Command::new("tmux")
            .args(["-L", &socket, "new-session", "-d", "-x", "150", "-y", "20"])
            .arg(command)
            .status()
            .ok()?;
        assert!(started.success(), "tmux new-session");
        Some(Tmux { socket })
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p"])
    }

    /// Waits until the screen satisfies `check`; panics with the screen after `PROMPT`.
    fn until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PROMPT;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "{what}; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_in_a_terminal_shows_the_locks_sorts_and_quits_restoring_the_terminal() {
    let server = RedisServer::start();
    let held = hold(&server, "topt:").await;
    // The pane's shell runs rlock top, then says how it exited and stays for us to read.
    let command = format!(
        "printf 'before top\\n'; REDIS_URL={} {} top 'topt:*'; echo \"top exited $?\"; \
         stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon; sleep 60",
        server.url(),
        env!("CARGO_BIN_EXE_rlock")
    );
    let Some(tmux) = Tmux::start(&command) else {
        panic!("tmux is needed for this test (scripts/ensure-deps.sh installs it)");
    };
    // (Blocking waits: this runtime's other worker serves the locks' tasks meanwhile.)
    let screen = tmux.until("the locks shown", |s| {
        s.contains("topt:plain") && s.contains("topt:rw") && s.contains("topt:fenced")
    });
    assert!(screen.contains("sort: lease"), "{screen}");
    assert!(screen.contains("top-test@"), "holders named: {screen}");
    assert!(screen.contains("3 locks"), "{screen}");
    let row = |screen: &str, name: &str| screen.lines().position(|l| l.contains(name));

    tmux.tmux(&["send-keys", "n"]);
    let screen = tmux.until("sorted by name", |s| s.contains("sort: name"));
    assert!(row(&screen, "topt:fenced") < row(&screen, "topt:plain"));
    assert!(row(&screen, "topt:plain") < row(&screen, "topt:rw"));

    tmux.tmux(&["send-keys", "q"]);
    let screen = tmux.until("top quits", |s| {
        s.contains("top exited") && s.lines().any(|l| l.trim().ends_with("icanon"))
    });
    assert!(screen.contains("top exited 0"), "{screen}");
    // Back on the normal screen, as it was: the table is gone, what was printed before is
    // there, and the terminal is out of raw mode (`stty` says `icanon`, not `-icanon`).
    assert!(screen.contains("before top"), "{screen}");
    assert!(
        !screen.contains("HOLDERS"),
        "alternate screen left: {screen}"
    );
    let canonical = screen.lines().any(|l| l.trim() == "icanon");
    assert!(
        canonical,
        "the terminal is back in canonical mode: {screen}"
    );
    held.release().await;
}
