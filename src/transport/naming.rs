//! Holders you can name: every connection of a client carries `CLIENT SETNAME
//! rlock:<client id>:<service>@<host>:<pid>`, so an operator's `CLIENT LIST` (and
//! [`LockClient::inspect`](crate::LockClient::inspect)) map a lock field's client id to a
//! host, a process and an address. No keys are written for it.
//!
//! redis-rs has no hook to name a connection it opens (its setup sends only `AUTH`, `SELECT`
//! and `CLIENT SETINFO`), so the name is ours to keep: connections this crate opens are named
//! when they open; a `ConnectionManager` ([`Named`]), which in RESP2 reconnects only after a
//! request failed on the dropped connection, is named again after each such failure, the
//! `CLIENT SETNAME` going out on the new connection. Where the ACL refuses `CLIENT`, the
//! client carries on unnamed and stops asking.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};

/// The name a client's connections carry, and whether the server refused it (shared by all
/// of the client's connections: one refusal stops every further try).
#[derive(Clone, Debug)]
pub(crate) struct ConnName {
    name: Arc<str>,
    /// The client's id (the transport's spans carry it).
    client_id: Arc<str>,
    refused: Arc<AtomicBool>,
}

impl ConnName {
    /// The name of the client `client_id`, running as `service` in this process, whose
    /// holders listen on their locks' channels if it `watches`.
    pub(crate) fn new(client_id: &str, service: &str, watches: bool) -> ConnName {
        let name =
            crate::inspect::ClientName::new(client_id, service, &host_name(), watches).to_string();
        ConnName {
            name: name.into(),
            client_id: client_id.into(),
            refused: Arc::default(),
        }
    }

    /// The id of the client whose connections carry this name.
    pub(crate) fn client_id(&self) -> &str {
        &self.client_id
    }

    /// `CLIENT SETNAME` on `conn` (one connection, or every node of a cluster connection).
    /// Fails only when the connection did: a refusal is remembered and is not an error.
    pub(crate) async fn apply<C: ConnectionLike>(&self, conn: &mut C) -> redis::RedisResult<()> {
        if self.refused.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("SETNAME").arg(&*self.name);
        match conn
            .req_packed_command(&cmd)
            .await
            .and_then(Value::extract_error)
        {
            Ok(_) => Ok(()),
            Err(err) if is_refusal(&err) => {
                if !self.refused.swap(true, Ordering::Relaxed) {
                    tracing::debug!(error = %err, "CLIENT SETNAME refused; connections stay unnamed");
                }
                Ok(())
            }
            Err(err) => Err(err),
        }
    }
}

/// A refusal, not a fault of the connection: the ACL's `NOPERM`, or a server (or proxy) that
/// does not know the command.
fn is_refusal(err: &RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
        || err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
}

/// Names a connection again after a failure that dropped it: the next request reconnects,
/// and the `CLIENT SETNAME` sent in the background is that request.
#[derive(Clone, Debug)]
pub(crate) struct Renamer {
    name: ConnName,
    /// Set while a renaming task runs, so a burst of failures sends one `CLIENT SETNAME`.
    busy: Arc<AtomicBool>,
}

/// How often, and how far apart, a renaming task tries while the server is unreachable.
const RENAME_TRIES: u32 = 20;
const RENAME_PAUSE: Duration = Duration::from_millis(250);

impl Renamer {
    pub(crate) fn new(name: ConnName) -> Renamer {
        Renamer {
            name,
            busy: Arc::default(),
        }
    }

    /// After `err` on `conn`: if it dropped the connection, names the next one.
    pub(crate) fn after<C>(&self, err: &RedisError, conn: &C)
    where
        C: ConnectionLike + Clone + Send + 'static,
    {
        if !(err.is_connection_dropped() || err.is_io_error() || err.is_timeout())
            || self.busy.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let (name, mut conn, busy) = (self.name.clone(), conn.clone(), self.busy.clone());
        tokio::spawn(async move {
            for _ in 0..RENAME_TRIES {
                if name.apply(&mut conn).await.is_ok() {
                    break;
                }
                tokio::time::sleep(RENAME_PAUSE).await;
            }
            busy.store(false, Ordering::Release);
        });
    }
}

/// A [`ConnectionManager`] that keeps its name across reconnects (see the module docs).
#[derive(Clone)]
pub(crate) struct Named {
    conn: ConnectionManager,
    renamer: Option<Renamer>,
}

impl Named {
    /// `conn`, named now (when a name is given).
    pub(crate) async fn new(
        mut conn: ConnectionManager,
        name: Option<ConnName>,
    ) -> redis::RedisResult<Named> {
        if let Some(name) = &name {
            name.apply(&mut conn).await?;
        }
        Ok(Named {
            conn,
            renamer: name.map(Renamer::new),
        })
    }

    fn after(&self, err: &RedisError) {
        if let Some(renamer) = &self.renamer {
            renamer.after(err, &self.conn);
        }
    }
}

impl ConnectionLike for Named {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let reply = self.conn.req_packed_command(cmd).await;
            if let Err(err) = &reply {
                self.after(err);
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let replies = self.conn.req_packed_commands(cmd, offset, count).await;
            if let Err(err) = &replies {
                self.after(err);
            }
            replies
        })
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

/// This machine's name, as `CLIENT LIST` may carry it: Linux's kernel host name, else the
/// `HOSTNAME` environment variable.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// The service name by default: this program's file name.
pub(crate) fn program_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".to_string())
}
