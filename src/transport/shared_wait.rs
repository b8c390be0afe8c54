//! One `WAIT` for the writes already queued: group commit for replica sync.
//!
//! `WAIT` blocks the connection it is sent on until the replicas answer, and every lock write
//! of a client shares one multiplexed connection per master, so with a `WAIT` behind each write,
//! 64 owners would queue behind one another's `WAIT`s one at a time. But a `WAIT` acknowledges
//! every write sent before it on its connection. So while one write and its `WAIT` are out,
//! the writes that come meanwhile queue here, and go out together behind one `WAIT` as soon as
//! the one before is answered: a lone write is never held back (no timer), a busy master gets
//! batches as large as its queue, and every write still returns only once the replicas counted
//! for it acknowledged it (or were found not to).
//!
//! The first write to find its master idle sends at once, from its own task (no hop); what
//! queues behind it is sent by a task of its own, so a caller that drops its future mid-write
//! never strands the writes queued behind it.
//!
//! **A spare lane.** A write that finds its master busy would wait out the `WAIT` ahead of it
//! before its own even starts: a waiter woken by an unlock message is sent behind that
//! unlock's `WAIT`. So a connection that waits for replicas has a second connection beside it
//! (its spare lane, with queues of its own): a write that finds the master busy here and idle
//! there goes there at once; with both busy it queues here. Writes whose order matters are
//! never in flight together (each waits for the other's reply), so two lanes reorder nothing.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisResult, Value};
use tokio::sync::oneshot;

use super::write::{Target, Wait};
use super::Connection;

/// The replies of a write's commands, and its `WAIT`'s reply (`None`: none came back).
pub(crate) type Replies = RedisResult<(Vec<RedisResult<Value>>, Option<RedisResult<Value>>)>;

/// The queues of one connection's masters.
#[derive(Default)]
pub(crate) struct SharedWait {
    queues: Mutex<HashMap<Target, Queue>>,
    /// The spare lane: another connection to the same masters (whose own has none).
    spare: OnceLock<Connection>,
}

/// A master's queue: whether a write is out, and the writes waiting for it to come back.
#[derive(Default)]
struct Queue {
    busy: bool,
    waiting: Vec<Queued>,
}

struct Queued {
    cmds: Vec<Cmd>,
    wait: Wait,
    first_key: String,
    answer: oneshot::Sender<Replies>,
}

impl SharedWait {
    /// Sends `cmds` to `target` with a `WAIT` behind them: at once if the master is idle,
    /// else with the writes queued behind the one out.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave `cmds` sent or queued to be sent; it never holds back
    /// the writes queued behind it.
    pub(crate) async fn send(
        self: &Arc<Self>,
        conn: &Connection,
        target: &Target,
        cmds: Vec<Cmd>,
        wait: Wait,
        first_key: &str,
    ) -> Replies {
        if let Some((spare, lane)) = self.spare.get().and_then(|c| Some((c, c.shared_wait()?))) {
            // (Checked apart, so a race may queue a write the other lane could have taken:
            // it goes out with the next batch, as without a spare.)
            if self.is_busy(target) && !lane.is_busy(target) {
                return Box::pin(lane.send(spare, target, cmds, wait, first_key)).await;
            }
        }
        let queued = {
            let mut queues = self.queues.lock();
            let queue = queues.entry(target.clone()).or_default();
            if queue.busy {
                let (answer, reply) = oneshot::channel();
                queue.waiting.push(Queued {
                    cmds,
                    wait,
                    first_key: first_key.to_string(),
                    answer,
                });
                Err(reply)
            } else {
                queue.busy = true;
                Ok(cmds)
            }
        };
        match queued {
            Err(reply) => reply.await.unwrap_or_else(|_| Err(dropped())),
            Ok(cmds) => {
                let _baton = Baton {
                    shared: self.clone(),
                    conn: conn.clone(),
                    target: target.clone(),
                };
                let mut replies =
                    send_batch(conn.clone(), target, vec![cmds], wait, first_key).await;
                replies.pop().unwrap_or_else(|| Err(dropped()))
            }
        }
    }

    /// Gives this connection its spare lane (once; see the module doc).
    pub(crate) fn set_spare(&self, spare: Connection) {
        let _ = self.spare.set(spare);
    }

    /// Whether a write to `target` is out on this connection.
    fn is_busy(&self, target: &Target) -> bool {
        self.queues.lock().get(target).is_some_and(|q| q.busy)
    }

    /// Drops what queued at `target` (those writes fail, outcome unknown) and marks it idle:
    /// its sender is gone.
    fn reset(&self, target: &Target) {
        if let Some(queue) = self.queues.lock().get_mut(target) {
            queue.waiting.clear();
            queue.busy = false;
        }
    }

    /// The writes queued at `target` (none left: it is idle again).
    fn take(&self, target: &Target) -> Vec<Queued> {
        let mut queues = self.queues.lock();
        let Some(queue) = queues.get_mut(target) else {
            return Vec::new();
        };
        let waiting = std::mem::take(&mut queue.waiting);
        if waiting.is_empty() {
            queue.busy = false;
        }
        waiting
    }
}

/// Held by the write that went out at once: when it is back (or dropped), whatever queued
/// behind it is handed to a task that sends it.
struct Baton {
    shared: Arc<SharedWait>,
    conn: Connection,
    target: Target,
}

impl Drop for Baton {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // (Dropped outside a runtime, as one shuts down: what queued fails, outcome
            // unknown, and the master is idle again.)
            self.shared.reset(&self.target);
            return;
        };
        let batch = self.shared.take(&self.target);
        if batch.is_empty() {
            return;
        }
        let (shared, conn, target) = (self.shared.clone(), self.conn.clone(), self.target.clone());
        runtime.spawn(async move {
            // (Cancelled with its runtime: the master must not stay busy for good.)
            let mut idle = Idle(Some((shared.clone(), target.clone())));
            let mut batch = batch;
            while !batch.is_empty() {
                flush(&conn, &target, batch).await;
                batch = shared.take(&target);
            }
            idle.0 = None;
        });
    }
}

/// Clears a master's queue if the task sending it ends before the queue is empty.
struct Idle(Option<(Arc<SharedWait>, Target)>);

impl Drop for Idle {
    fn drop(&mut self) {
        if let Some((shared, target)) = self.0.take() {
            shared.reset(&target);
        }
    }
}

/// Sends `batch` in one write behind one `WAIT`, and answers each of its writes.
async fn flush(conn: &Connection, target: &Target, batch: Vec<Queued>) {
    // (Each was asked with the master's replicas as counted then: wait for the most.)
    let wait = Wait {
        replicas: batch.iter().map(|q| q.wait.replicas).max().unwrap_or(0),
        timeout_ms: batch.iter().map(|q| q.wait.timeout_ms).max().unwrap_or(0),
    };
    let first_key = batch[0].first_key.clone();
    let (writes, answers): (Vec<_>, Vec<_>) = batch.into_iter().map(|q| (q.cmds, q.answer)).unzip();
    let replies = send_batch(conn.clone(), target, writes, wait, &first_key).await;
    for (answer, replies) in answers.into_iter().zip(replies) {
        let _ = answer.send(replies);
    }
}

/// One write of every command of `writes` and a `WAIT`; each write's replies, with the
/// `WAIT`'s reply.
async fn send_batch(
    mut conn: Connection,
    target: &Target,
    writes: Vec<Vec<Cmd>>,
    wait: Wait,
    first_key: &str,
) -> Vec<Replies> {
    let count: usize = writes.iter().map(|w| w.len()).sum();
    let lens: Vec<usize> = writes.iter().map(|w| w.len()).collect();
    let mut pipe = Pipeline::with_capacity(count + 1);
    for cmd in writes.into_iter().flatten() {
        pipe.add_command(cmd);
    }
    pipe.cmd("WAIT").arg(wait.replicas).arg(wait.timeout_ms);
    match conn.send_many(target, &pipe, first_key).await {
        Err(err) => lens.iter().map(|_| Err(err.clone())).collect(),
        Ok(mut replies) => {
            let acks = (replies.len() > count).then(|| replies.pop()).flatten();
            let mut replies = replies.into_iter();
            (lens.iter())
                .map(|&n| Ok((replies.by_ref().take(n).collect(), acks.clone())))
                .collect()
        }
    }
}

fn dropped() -> RedisError {
    RedisError::from((ErrorKind::Io, "the shared write was dropped"))
}
