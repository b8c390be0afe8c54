//! `rlock unlock --force`: delete a lock whoever holds it, and wake its waiters.

use std::io::{BufRead, IsTerminal, Write};

use redisson_lock::{Config, LockClient};

use redisson_lock::inspect::{LockKind, LockState};

use crate::failure::{self, Failure};

/// What `rlock unlock` was asked to do.
pub struct UnlockArgs {
    /// The lock's name.
    pub name: String,
    /// `--force` was given (required: there is no owner-checked unlock from outside).
    pub force: bool,
    /// `--yes`: do not ask for confirmation.
    pub yes: bool,
}

/// Checks the flags, shows who holds the lock, asks for confirmation, then runs the library's
/// force unlock (which publishes the unlock message, so waiters wake at once).
pub fn unlock(
    config: Config,
    args: UnlockArgs,
    runtime: &tokio::runtime::Runtime,
) -> Result<u8, Failure> {
    if !args.force {
        return Err(Failure::usage(
            "`unlock` deletes the lock whoever holds it: pass --force to confirm you mean that",
        ));
    }
    let stdin = std::io::stdin();
    if !args.yes && !stdin.is_terminal() {
        return Err(Failure::usage(
            "refusing to force-unlock without confirmation: stdin is not a terminal; pass --yes",
        ));
    }

    let client = runtime
        .block_on(LockClient::with_config(config))
        .map_err(Failure::from_lock)?;
    let before = runtime.block_on(client.inspect(&args.name));
    let before = before.map_err(Failure::from_lock)?;
    match before.state {
        LockState::Free => {
            println!("`{}` is not held: nothing to unlock", args.name);
            runtime.block_on(client.shutdown());
            return Ok(0);
        }
        LockState::Count => {
            runtime.block_on(client.shutdown());
            let what = before.kind.map_or("a count", |k| k.describe());
            return Err(Failure::new(
                failure::FAILURE,
                format!(
                    "`{}` is a {what}, not a lock: releasing a semaphore's permits or counting a latch down is not an unlock; left alone",
                    args.name
                ),
            ));
        }
        LockState::NotALock => {
            runtime.block_on(client.shutdown());
            return Err(Failure::new(
                failure::FAILURE,
                format!(
                    "key `{}` holds a {}, not a lock: left alone",
                    before.key, before.redis_type
                ),
            ));
        }
        LockState::Held => {}
    }
    if !args.yes {
        let holders: Vec<String> = (before.holders.iter())
            .map(|o| match &o.client {
                Some(client) => format!("{} ({})", o.field, crate::status::client_text(client)),
                None => o.field.clone(),
            })
            .collect();
        eprint!(
            "Force-unlock `{}` held by {}? Holders notice at once if they listen for their loss (rlock run does), else at their next renewal. [y/N] ",
            args.name,
            holders.join(", ")
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        stdin
            .lock()
            .read_line(&mut answer)
            .map_err(|e| Failure::new(failure::FAILURE, format!("cannot read the answer: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "Yes" | "YES") {
            runtime.block_on(client.shutdown());
            return Err(Failure::new(
                failure::FAILURE,
                "aborted: the lock was left alone",
            ));
        }
    }

    // Each kind's own force unlock: it deletes what that kind holds and publishes what its
    // waiters listen for.
    let name = args.name.clone();
    let released = runtime.block_on(async {
        let released = match (before.kind, before.mode.as_deref()) {
            (Some(LockKind::ReadWrite), Some("read")) => {
                client
                    .read_write_lock(name)
                    .read_lock()
                    .force_unlock()
                    .await
            }
            (Some(LockKind::ReadWrite), _) => {
                client
                    .read_write_lock(name)
                    .write_lock()
                    .force_unlock()
                    .await
            }
            (Some(LockKind::Fenced), _) => client.fenced_lock(name).force_unlock().await,
            (Some(LockKind::Fair), _) => client.fair_lock(name).force_unlock().await,
            _ => client.lock(name).force_unlock().await,
        };
        client.shutdown().await;
        released
    });
    let woken = match before.kind {
        // (Its waiters listen on channels of their own: the head of the queue is woken.)
        Some(LockKind::Fair) => "the first waiter in the queue was notified",
        _ => "waiters were notified",
    };
    match released.map_err(Failure::from_lock)? {
        true => println!("force-unlocked `{}`; {woken}", args.name),
        false => println!(
            "`{}` was released in the meantime: nothing to unlock",
            args.name
        ),
    }
    Ok(0)
}
