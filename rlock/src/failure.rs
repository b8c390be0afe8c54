//! Exit codes and the one-line error every command ends with when it fails.

use std::fmt;

/// Some other failure: the key holds something that is not a lock, a confirmation was
/// declined, the demo could not start its server.
pub const FAILURE: u8 = 1;
/// The command line is wrong (unknown flag, bad duration or URL, `unlock` without `--force`,
/// or no terminal to confirm on and no `--yes`). Same value as BSD's `EX_USAGE`.
pub const USAGE: u8 = 64;
/// `run`: `--metrics-addr` cannot be listened on (in use, not an address of this machine,
/// or a privileged port); nothing was locked. Same value as BSD's `EX_UNAVAILABLE`.
pub const CANNOT_LISTEN: u8 = 69;
/// `run`: the lock (or permit) was not acquired within `--wait` (or at once with `--wait 0`);
/// `latch await`: the latch was still closed after `--wait`.
pub const NOT_ACQUIRED: u8 = 73;
/// `run`: the lock was lost while the command ran (the command was terminated), or was found
/// lost when releasing it after the command finished.
pub const LOCK_LOST: u8 = 74;
/// Redis could not be reached, refused the login, or answered with an error.
pub const REDIS: u8 = 75;
/// `run`: the command was found but could not be started (as in `env` and shells).
pub const CANNOT_EXECUTE: u8 = 126;
/// `run`: the command was not found (as in `env` and shells).
pub const NOT_FOUND: u8 = 127;

/// The exit-code table shown at the end of `rlock --help` (and in the README).
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0..=255  run: the command's own exit status (128+N if it was killed by signal N)
  0        status, unlock, permits, latch, demo: success
  1        other failure (the key is not a lock, confirmation declined, latch set on a
           latch that has a count, ...)
  64       usage error (bad flag, duration or URL; unlock without --force, or without
           a terminal to confirm on and without --yes)
  69       run: cannot listen on --metrics-addr (nothing was locked)
  73       run: the lock (or permit) was not acquired within --wait;
           latch await: the latch was still closed after --wait
  74       run: the lock was lost while the command ran (the command was terminated)
  75       cannot reach Redis, or Redis answered with an error
  126/127  run: the command could not be executed / was not found
  130/143  run: interrupted by SIGINT/SIGTERM while waiting for the lock (128+N)
A command may itself exit with 73, 74 or 75: when that matters, check stderr, where rlock
prints one line starting with `rlock:` whenever it fails on its own account.";

/// A failure of the command: printed as `rlock: <message>` on stderr, then exit with `code`.
#[derive(Debug)]
pub struct Failure {
    /// The process exit code.
    pub code: u8,
    /// One line, without the `rlock: ` prefix.
    pub message: String,
}

impl Failure {
    /// A failure with an explicit exit code.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A usage error (exit 64).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }

    /// Classifies a library error: connection and Redis errors exit 75, bad settings 64,
    /// everything else 1.
    pub fn from_lock(err: redisson_lock::Error) -> Self {
        let code = if err.is_invalid_input() {
            USAGE
        } else if err.is_connection() || matches!(err, redisson_lock::Error::Redis(_)) {
            REDIS
        } else {
            FAILURE
        };
        Self::new(code, err.to_string())
    }

    /// A failure of a plain redis-rs call (exit 75).
    pub fn from_redis(err: redis::RedisError) -> Self {
        Self::new(REDIS, format!("redis error: {err}"))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the underlying error put in its message.
        let line = self.message.replace(['\n', '\r'], " ");
        write!(f, "rlock: {line}")
    }
}
