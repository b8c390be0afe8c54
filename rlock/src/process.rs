//! Child processes and signals: the parts of `run` (and `demo`) that talk to the OS.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::signal::unix::{signal, SignalKind};

/// The signals `rlock` catches instead of dying: while it waits for the lock they end the wait;
/// while the command runs they are forwarded to it. `rlock` itself only exits once the command
/// has, so the lock is always released after the command stops.
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT (must run inside tokio).
    pub fn install() -> io::Result<Self> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
        })
    }

    /// The next signal received.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal is either returned or left for the next call.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.interrupt.recv() => Signal::SIGINT,
            _ = self.terminate.recv() => Signal::SIGTERM,
            _ = self.hangup.recv() => Signal::SIGHUP,
            _ = self.quit.recv() => Signal::SIGQUIT,
        }
    }
}

/// Where signals for the command go.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// The command's own process group (the command and everything it started).
    Group(Pid),
    /// The command's process alone.
    Process(Pid),
}

impl Target {
    /// Sends `signal`; a process or group already gone is not an error.
    pub fn send(self, signal: Signal) {
        let _ = match self {
            Target::Group(pgid) => nix::sys::signal::killpg(pgid, signal),
            Target::Process(pid) => nix::sys::signal::kill(pid, signal),
        };
    }
}

/// The shell convention for a child's status: its exit code, or 128 + N if signal N killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => (128 + signal).clamp(0, 255) as u8,
        (None, None) => 255,
    }
}

/// Makes the child receive SIGTERM if `rlock` dies first (even by SIGKILL), so that a command
/// never goes on running once nothing renews its lock. Linux only; a no-op elsewhere.
///
/// The parent-death signal is tied to the *thread* that forks: spawn from the thread that lives
/// as long as the process (`rlock` runs a current-thread runtime on its main thread).
pub fn die_with_parent(command: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = nix::unistd::getpid();
        // SAFETY: the closure runs in the forked child before `exec`. It makes only two
        // async-signal-safe system calls (prctl, getppid) and does not allocate: the error is
        // built from a raw errno.
        unsafe {
            command.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(io::Error::from)?;
                if nix::unistd::getppid() != parent {
                    // The parent died between fork and prctl: behave as if signalled.
                    return Err(io::Error::from(nix::errno::Errno::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137); // killed by SIGKILL
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143); // killed by SIGTERM
    }
}
