//! The command connection every lock operation goes through, whatever the topology.
//!
//! The engine and the scripts see one [`Connection`] (a redis-rs [`ConnectionLike`], cheap to
//! clone) and ask it how to batch many keys into one call ([`Connection::batches`]). Standalone
//! is a `ConnectionManager` today; a cluster or sentinel connection is one more variant here,
//! with no change to the lock kinds.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::slots::{self, Grouping};

/// The connection scripts and queries are sent on.
#[derive(Clone)]
pub(crate) enum Connection {
    /// One server (reconnects by itself).
    Standalone(ConnectionManager),
}

impl Connection {
    /// How keys may share one call: a standalone server takes any keys in one script, a
    /// cluster only keys of one slot.
    pub(crate) fn grouping(&self) -> Grouping {
        match self {
            Connection::Standalone(_) => Grouping::Any,
        }
    }

    /// Splits `items` into batches of at most `max` that one call may carry (reordering them
    /// so that each batch is one slice).
    pub(crate) fn batches<'a, T>(
        &self,
        items: &'a mut [T],
        key: impl Fn(&T) -> &str,
        max: usize,
    ) -> Vec<&'a [T]> {
        slots::batches(items, key, max, self.grouping())
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Standalone(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Standalone(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Standalone(conn) => conn.get_db(),
        }
    }
}
