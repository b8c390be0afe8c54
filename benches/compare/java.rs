//! Child processes: Redisson's `interop.Bench` (one scenario run to completion) and `Driven`,
//! a child (a JVM serving P1/P2 repetitions, or a P4 child in Rust or Java) driven over
//! stdin/stdout.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub(crate) struct Java {
    pub(crate) version: String,
    pub(crate) jar: PathBuf,
}

pub(crate) fn java_command(java: &Java, url: &str, args: &[String]) -> Command {
    let mut cmd = Command::new(std::env::var("JAVA").unwrap_or_else(|_| "java".into()));
    cmd.arg("-Xms512m")
        .arg("-Xmx2g")
        .arg("-cp")
        .arg(&java.jar)
        .arg("interop.Bench")
        .arg(url)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd
}

/// Runs one Java scenario to completion; returns its JSON result lines.
pub(crate) fn run_java(java: &Java, url: &str, args: &[String]) -> Vec<Value> {
    let mut child = java_command(java, url, args).spawn().expect("start java");
    drop(child.stdin.take());
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut results = Vec::new();
    for line in out.lines() {
        let line = line.unwrap();
        match serde_json::from_str::<Value>(&line) {
            Ok(v) => results.push(v),
            Err(_) => eprintln!("java: {line}"),
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "interop.Bench {args:?} failed: {status}");
    results
}

/// A child driven over stdin/stdout: JSON lines out, one request per line in.
pub(crate) struct Driven {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
}

impl Driven {
    pub(crate) fn start(mut cmd: Command) -> Driven {
        let mut child = cmd.spawn().expect("start a driven child");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(_) => eprintln!("child: {line}"),
                }
            }
        });
        Driven {
            child,
            stdin,
            lines,
        }
    }

    pub(crate) fn expect(&mut self, phase: &str, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if v["phase"] == phase => return Some(v),
                Ok(v) => eprintln!("child: {v}"),
                Err(_) => return None,
            }
        }
    }

    /// Sends one request line and returns the result lines that precede its
    /// `{"phase":"done"}`.
    pub(crate) fn request(&mut self, line: &str, timeout: Duration) -> Vec<Value> {
        self.send(line);
        let deadline = Instant::now() + timeout;
        let mut results = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if v["phase"] == "done" => return results,
                Ok(v) => results.push(v),
                Err(_) => panic!("no answer to {line:?} within {timeout:?}"),
            }
        }
    }

    pub(crate) fn send(&mut self, line: &str) {
        let _ = writeln!(self.stdin, "{line}");
        let _ = self.stdin.flush();
    }

    pub(crate) fn finish(mut self) {
        self.send("quit");
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
