//! `rlock run`: hold a lock for as long as a command runs.

use std::ffi::OsString;
use std::time::Duration;

use clap::ValueEnum;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use redisson_lock::{Config, Lease, LockClient, LockGuard, LostReason, Wait};

use crate::duration::format_duration;
use crate::failure::{self, Failure};
use crate::process::{self, Signals, Target};

/// Which of Redisson's locks `rlock run` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    /// `RLock` (`getLock(name)`).
    Lock,
    /// `RFencedLock` (`getFencedLock(name)`): the command gets RLOCK_FENCING_TOKEN.
    Fenced,
    /// The read half of `RReadWriteLock` (`getReadWriteLock(name).readLock()`): shared.
    Read,
    /// The write half of `RReadWriteLock`: exclusive, of readers too.
    Write,
    /// `RFairLock` (`getFairLock(name)`): waiters are served in arrival order.
    Fair,
    /// `RSpinLock` (`getSpinLock(name)`): no pub/sub; waiting polls with a back-off.
    Spin,
    /// One permit of `RPermitExpirableSemaphore` (`getPermitExpirableSemaphore(name)`): at
    /// most N of these commands at once across the fleet. The permit is kept alive while the
    /// command runs (or held for a fixed --lease) and given back when it ends; the command
    /// gets RLOCK_PERMIT_ID. --permits N gives a semaphore that does not exist yet N permits.
    Permit,
}

/// What `rlock run` was asked to do.
pub struct RunArgs {
    /// The lock's name (the configured key prefix is added to it).
    pub name: String,
    /// Which kind of lock.
    pub kind: KindArg,
    /// How long to wait for the lock.
    pub wait: Wait,
    /// How long the lock is held: renewed by the watchdog, or a fixed lease.
    pub lease: Lease,
    /// How long the command has between SIGTERM and SIGKILL once the lock is lost.
    pub grace: Duration,
    /// Keep the command in rlock's process group (so it can read the terminal); signals then
    /// go to the command alone instead of its whole process group.
    pub foreground: bool,
    /// Say on stderr (once) when the lock has been held this long; the library's hold warning
    /// (event and metric) is set to it too.
    pub warn_after: Option<Duration>,
    /// `--kind permit`: the permits to give the semaphore first if it does not exist yet.
    pub permits: Option<u32>,
    /// The command and its arguments (at least the command).
    pub command: Vec<OsString>,
}

/// How the command ended.
enum Ending {
    /// It exited by itself (or after a forwarded signal) with this status.
    Exited(std::process::ExitStatus),
    /// The lock was lost first; the command was stopped as described.
    Lost(&'static str),
}

/// Acquires the lock, runs the command while holding it, releases it, and returns the exit
/// code `rlock` must end with (the command's own, or one of [`failure`]'s codes).
pub async fn run(config: Config, args: RunArgs) -> Result<u8, Failure> {
    let mut signals = Signals::install()
        .map_err(|e| Failure::new(failure::FAILURE, format!("cannot handle signals: {e}")))?;
    let client = LockClient::with_config(config)
        .await
        .map_err(Failure::from_lock)?;
    let result = hold_and_run(&client, &args, &mut signals).await;
    // Releases anything still held (after an error) and flushes pending unlocks.
    client.shutdown().await;
    result
}

async fn hold_and_run(
    client: &LockClient,
    args: &RunArgs,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let name = args.name.clone();
    let lock = match args.kind {
        KindArg::Lock => client.lock(name),
        KindArg::Read => client.read_write_lock(name).read_lock(),
        KindArg::Write => client.read_write_lock(name).write_lock(),
        KindArg::Fenced => client.lock(name),
        KindArg::Fair => client.fair_lock(name),
        KindArg::Spin => client.spin_lock(name),
        KindArg::Permit => client.lock(name),
    };
    let mut permit_id = None;
    let acquire = async {
        match args.kind {
            // A permit, as a lock guard; its id for the command.
            KindArg::Permit => {
                let jobs = client.permit_semaphore(args.name.clone());
                if let Some(permits) = args.permits {
                    jobs.try_set_permits(permits).await?;
                }
                let permit = jobs.try_acquire(args.wait, args.lease).await?;
                Ok(permit.map(|p| {
                    let (guard, id) = p.into_guard();
                    permit_id = Some(id);
                    (guard, None)
                }))
            }
            // The fenced lock's guard, with its token for the command.
            KindArg::Fenced => (client.fenced_lock(args.name.clone()))
                .acquire(args.wait, args.lease)
                .await
                .map(|g| {
                    g.map(|g| {
                        let token = g.token();
                        (g.into_guard(), Some(token))
                    })
                }),
            _ => (lock.acquire(args.wait, args.lease).await).map(|g| g.map(|g| (g, None))),
        }
    };
    // Acquiring is cancel safe: a signal while waiting leaves nothing behind.
    let guard = tokio::select! {
        acquired = acquire => acquired.map_err(Failure::from_lock)?,
        signal = signals.recv() => {
            return Err(Failure::new(
                128 + signal as u8,
                format!("interrupted by {signal} while waiting for lock `{}`", args.name),
            ));
        }
    };
    let Some((guard, token)) = guard else {
        let wait = format_duration(args.wait.limit().unwrap_or_default());
        let held = match args.kind {
            KindArg::Permit => format!(
                "no permit of `{}` came free (all taken, or the semaphore has none: see --permits)",
                args.name
            ),
            _ => format!("lock `{}` is held by another owner", args.name),
        };
        return Err(Failure::new(
            failure::NOT_ACQUIRED,
            format!("{held}; not acquired within --wait {wait}"),
        ));
    };

    let program = &args.command[0];
    let mut command = std::process::Command::new(program);
    command
        .args(&args.command[1..])
        .env("RLOCK_NAME", &args.name)
        .env("RLOCK_KEY", lock.key())
        .env("RLOCK_OWNER_FIELD", guard.owner_field());
    if let Some(token) = token {
        command.env("RLOCK_FENCING_TOKEN", token.to_string());
    }
    if let Some(id) = &permit_id {
        command.env("RLOCK_PERMIT_ID", id);
    }
    if !args.foreground {
        // Its own process group, so that signals reach everything it started.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
    }
    process::die_with_parent(&mut command);
    let mut child = match tokio::process::Command::from(command).spawn() {
        Ok(child) => child,
        Err(err) => {
            let code = if err.kind() == std::io::ErrorKind::NotFound {
                failure::NOT_FOUND
            } else {
                failure::CANNOT_EXECUTE
            };
            let _ = guard.unlock().await;
            return Err(Failure::new(
                code,
                format!("cannot run `{}`: {err}", program.to_string_lossy()),
            ));
        }
    };
    let pid = Pid::from_raw(child.id().expect("a child just spawned has a pid") as i32);
    let target = if args.foreground {
        Target::Process(pid)
    } else {
        Target::Group(pid)
    };

    let lost = guard.lost();
    tokio::pin!(lost);
    let warn = async {
        match args.warn_after {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(warn);
    let mut warned = false;
    let ending = loop {
        tokio::select! {
            biased;
            status = child.wait() => match status {
                Ok(status) => break Ending::Exited(status),
                Err(err) => {
                    // Cannot happen for a child we spawned; stop it rather than lose track.
                    target.send(Signal::SIGKILL);
                    return Err(Failure::new(failure::FAILURE, format!("cannot wait for the command: {err}")));
                }
            },
            _ = &mut lost => break Ending::Lost(terminate(&mut child, target, args.grace).await),
            signal = signals.recv() => target.send(signal),
            () = &mut warn, if !warned => {
                warned = true;
                eprintln!(
                    "rlock: warning: lock `{}` held for more than {} (--warn-after); the command is still running",
                    args.name,
                    format_duration(args.warn_after.unwrap_or_default())
                );
            }
        }
    };

    match ending {
        Ending::Lost(how) => Err(lost_failure(&args.name, guard.lost_reason(), how)),
        Ending::Exited(status) => release(guard, &args.name, process::exit_code(status)).await,
    }
}

/// Stops the command: SIGTERM, then SIGKILL if it is still running after `grace`. Returns how
/// it ended, for the message.
async fn terminate(
    child: &mut tokio::process::Child,
    target: Target,
    grace: Duration,
) -> &'static str {
    if let Ok(Some(_)) = child.try_wait() {
        return "the command had already exited";
    }
    target.send(Signal::SIGTERM);
    if let Ok(Ok(_)) = tokio::time::timeout(grace, child.wait()).await {
        return "the command was stopped with SIGTERM";
    }
    target.send(Signal::SIGKILL);
    let _ = child.start_kill();
    let _ = child.wait().await;
    "the command ignored SIGTERM for the grace period and was killed with SIGKILL"
}

/// Releases the lock after the command exited with `code`; a lock found lost at release turns
/// the result into [`failure::LOCK_LOST`], since the command may have run unprotected.
async fn release(guard: LockGuard, name: &str, code: u8) -> Result<u8, Failure> {
    match guard.unlock().await {
        Ok(()) => Ok(code),
        Err(err) if err.is_lock_lost() || err.is_not_owner() => Err(Failure::new(
            failure::LOCK_LOST,
            format!(
                "lock `{name}` was lost before the command finished (it exited with {code}); \
                 it may have run without the lock"
            ),
        )),
        Err(err) => {
            // Renewal has stopped: the lock ends with its lease. The command's work is done.
            eprintln!("rlock: warning: could not release lock `{name}` ({err}); it expires with its lease");
            Ok(code)
        }
    }
}

fn lost_failure(name: &str, reason: Option<LostReason>, how: &str) -> Failure {
    let why = reason.map_or_else(|| "lost".to_string(), |r| r.to_string());
    Failure::new(
        failure::LOCK_LOST,
        format!("lock `{name}` was lost while the command ran ({why}); {how}"),
    )
}
