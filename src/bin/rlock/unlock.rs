//! `rlock unlock --force`: delete a lock whoever holds it, and wake its waiters.

use std::io::{BufRead, IsTerminal, Write};

use redisson_lock::{Config, LockClient};

use crate::failure::{self, Failure};
use crate::server::{self, Server};
use crate::status::{self, Kind, State};

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
/// force unlock (which publishes the unlock message, so waiters wake at once). Synchronous
/// steps run before `runtime` is used.
pub fn unlock(
    config: Config,
    server: &Server,
    tls_ca: Option<&[u8]>,
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

    let key = format!("{}{}", config.key_prefix(), args.name);
    let (mut conn, _) = server::connect_for_key(server, &key, tls_ca)?;
    let before = status::inspect(&mut conn, config.key_prefix(), &args.name)?;
    match before.state {
        State::Free => {
            println!("`{}` is not held: nothing to unlock", args.name);
            return Ok(0);
        }
        State::NotALock => {
            return Err(Failure::new(
                failure::FAILURE,
                format!(
                    "key `{}` holds a {}, not a lock: left alone",
                    before.key, before.redis_type
                ),
            ));
        }
        State::Held => {}
    }
    if !args.yes {
        let holders: Vec<&str> = before.owners.iter().map(|o| o.field.as_str()).collect();
        eprint!(
            "Force-unlock `{}` held by {}? Holders only notice at their next renewal. [y/N] ",
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
            return Err(Failure::new(
                failure::FAILURE,
                "aborted: the lock was left alone",
            ));
        }
    }

    let name = args.name.clone();
    let released = runtime.block_on(async move {
        let client = LockClient::with_config(config).await?;
        let released = client.lock(name).force_unlock().await;
        client.shutdown().await;
        released
    });
    let woken = match before.kind {
        // Those waiters listen on other channels (docs/PROTOCOL.md §5): they retry on their timer.
        Some(Kind::ReadWrite) => "read-write lock waiters are not woken: they retry on their timer",
        Some(Kind::Fair) => "fair lock waiters are not woken: they retry on their timer",
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
