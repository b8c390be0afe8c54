//! A client's connection to the stand-in server, as the engine's `Connection` sees it: each
//! command is a round trip with a scheduling point on the way out and one on the way back, so
//! the model checker can run other tasks while a command is "on the wire", and a model can
//! have the network fail one command before it runs or lose its reply after it ran.

use std::sync::Arc;

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use super::server::Server;

/// What the network does to one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Delivered, and its reply too.
    None,
    /// Never reaches the server: nothing runs, the caller sees a dropped connection.
    Refuse,
    /// Runs on the server, and its reply is lost: the caller sees a dropped connection.
    LoseReply,
}

/// Decides each command's [`Fault`] from its arguments (a model's choice: the first acquire's
/// reply lost, say, or shuttle's random choice at every command).
pub type FaultPlan = Arc<dyn Fn(&[Vec<u8>]) -> Fault + Send + Sync>;

/// The commands a link sent, in the order they left it (before the network's delay: the
/// server's history has the order they ran in).
pub type SentLog = Arc<std::sync::Mutex<Vec<Vec<Vec<u8>>>>>;

/// A connection to the stand-in server (cheap to clone: all clones reach the same server).
#[derive(Clone)]
pub struct Link {
    server: Arc<Server>,
    faults: Option<FaultPlan>,
    sent: Option<SentLog>,
    /// Signalled to cut the client's pub/sub connection (its hub reconnects).
    cut: Arc<tokio::sync::Notify>,
}

impl Link {
    /// A connection to `server` that never fails.
    pub fn new(server: Arc<Server>) -> Link {
        Link {
            server,
            faults: None,
            sent: None,
            cut: Arc::default(),
        }
    }

    /// The same connection with the network failing commands as `plan` says.
    pub fn with_faults(mut self, plan: FaultPlan) -> Link {
        self.faults = Some(plan);
        self
    }

    /// The same connection, logging each command it sends into `log`.
    pub fn with_sent_log(mut self, log: SentLog) -> Link {
        self.sent = Some(log);
        self
    }

    /// Cuts the pub/sub connection of the client on this link, as a network fault would: what
    /// is published until its hub has subscribed again is lost to it.
    pub fn cut_pubsub(&self) {
        self.cut.notify_one();
    }

    /// Resolves when [`Link::cut_pubsub`] is called.
    pub(crate) async fn pubsub_cut(&self) {
        self.cut.notified().await;
    }

    /// The server this link reaches.
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }

    /// One round trip; an error reply is a value, a dropped connection an `Err`.
    async fn round_trip(&self, cmd: &Cmd) -> RedisResult<Value> {
        let args = args_of(cmd);
        let fault = self.faults.as_ref().map_or(Fault::None, |plan| plan(&args));
        if let Some(log) = &self.sent {
            log.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(args.clone());
        }
        crate::sync::yield_now().await;
        if fault == Fault::Refuse {
            return Err(dropped());
        }
        let reply = self.server.call(&args);
        crate::sync::yield_now().await;
        match (fault, reply) {
            (Fault::LoseReply, _) => Err(dropped()),
            (_, Ok(value)) => Ok(value),
            (_, Err(err)) => Ok(error_reply(err)),
        }
    }
}

/// A command's arguments as they would go on the wire.
pub(crate) fn args_of(cmd: &Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => bytes.to_vec(),
            // (A scan's cursor: the engine sends none.)
            _ => b"0".to_vec(),
        })
        .collect()
}

fn dropped() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "model: the connection dropped",
    ))
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.round_trip(cmd))
    }

    /// A pipeline's commands in order, each on its own (a pipeline is not a transaction):
    /// an error reply fails its command only, a dropped connection the rest.
    fn req_packed_commands<'a>(
        &'a mut self,
        pipe: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut replies = Vec::with_capacity(pipe.len());
            for cmd in pipe.cmd_iter() {
                replies.push(self.round_trip(cmd).await?);
            }
            Ok(replies.into_iter().skip(offset).take(count).collect())
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// An error reply as the connection hands it back: a value (`extract_error` makes it an
/// `Err`), as a server's `-CODE detail` line parses.
fn error_reply(err: RedisError) -> Value {
    match redis::ServerError::try_from(err) {
        Ok(server) => Value::ServerError(server),
        Err(other) => {
            redis::parse_redis_value(format!("-ERR {other}\r\n").as_bytes()).unwrap_or(Value::Nil)
        }
    }
}
