//! Spent latches and their sweeper.
//!
//! Once a latched write's answer is read its latch is spent (no re-send will come), but it
//! would linger until its PX runs out. Spent latches queue in the client's
//! [`SpentQueue`](crate::raw::spent::SpentQueue): the writes to their node carry their `DEL`
//! once a few have gathered, and every [`LATCH_SWEEP`] the sweeper deletes those no write
//! came for (of a key written once), a few `DEL`s at a time.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::future::{join_all, BoxFuture};
use crate::names;
use crate::raw::spent::{SpentQueue, LATCHES_PER_DEL};
use crate::raw::Protocol;

/// Sends of one latched write ([`SpentLatches::send_once`]) before its caller hears of the error.
const ONCE_ATTEMPTS: u32 = 3;
const RESEND_PAUSE: Duration = Duration::from_millis(50);

/// How often the sweeper looks for latches no write carried (far inside their PX).
const LATCH_SWEEP: Duration = Duration::from_millis(50);
/// `DEL`s a sweep would rather send one at a time (each answered before the next goes, so
/// the server serves other clients between them); a bigger sweep sends as many at once as
/// it takes to finish in this many round trips, so that a sweep keeps up with any rate of
/// unlocks however far the server is (a sweep that fell behind would only grow).
const SWEEP_ROUNDS: usize = 16;

/// Latches whose answers have been read, waiting for a write to carry their `DEL` or for the
/// next sweep.
pub(crate) struct SpentLatches {
    queue: Arc<SpentQueue>,
    /// Held by the sweep in flight: a sweep at shutdown must wait for the sweeper's, whose
    /// latches are out of the queue until its `DEL`s answer (or are put back).
    sweeping: tokio::sync::Mutex<()>,
}

impl SpentLatches {
    /// The spent latches of `queue` (the one the client's writes carry `DEL`s from).
    pub(crate) fn new(queue: Arc<SpentQueue>) -> SpentLatches {
        SpentLatches {
            queue,
            sweeping: tokio::sync::Mutex::new(()),
        }
    }

    /// Sends a write that a request latch of `key`'s makes exactly-once (a release of permits,
    /// a count-down): `send` is handed the latch, the same one for every send, and the write
    /// is re-sent after an answer lost to a transient error (the latch makes a re-send count
    /// nothing more), a few times at most. The latch is spent once an answer is read, or once
    /// the sends give up.
    pub(crate) async fn send_once<T, Sent>(
        &self,
        protocol: &Protocol,
        key: &str,
        send: impl Fn(String) -> Sent,
    ) -> redis::RedisResult<T>
    where
        Sent: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let latch = names::unlock_latch(key, &names::new_request_id());
        let mut attempt = 1;
        loop {
            match send(latch.clone()).await {
                Err(err) if attempt < ONCE_ATTEMPTS && crate::error::is_transient(&err) => {
                    tracing::debug!(key, error = %err, "answer lost; re-sending with the same latch");
                    attempt += 1;
                    crate::sync::time::sleep(RESEND_PAUSE).await;
                }
                answer => {
                    if self.retire(latch) {
                        self.sweep(protocol).await;
                    }
                    return answer;
                }
            }
        }
    }

    /// Queues a spent latch for deletion (never blocks, never sends). `true` once the client
    /// has shut down: no sweeper runs then, and the caller sweeps ([`Core::retire`]).
    ///
    /// [`Core::retire`]: crate::engine::Core::retire
    #[must_use = "after shutdown the caller sweeps"]
    pub(crate) fn retire(&self, latch: String) -> bool {
        self.queue.push(latch)
    }

    /// The client shuts down: the sweeper's last sweep comes next, and a latch spent after it
    /// is for its spender to sweep.
    pub(crate) fn close(&self) {
        self.queue.close();
    }

    /// Deletes every latch queued so far, each `DEL` confirmed. A `DEL` that fails puts its
    /// latches back for the next sweep (`false`): a latch left behind would linger for its
    /// whole PX, long after every fault has healed.
    pub(crate) async fn sweep(&self, protocol: &Protocol) -> bool {
        self.sweep_some(protocol, true).await
    }

    /// [`SpentLatches::sweep`] of the latches no write is likely to carry: those of groups
    /// no latch came to since the last sweep.
    async fn sweep_idle(&self, protocol: &Protocol) -> bool {
        self.sweep_some(protocol, false).await
    }

    async fn sweep_some(&self, protocol: &Protocol, all: bool) -> bool {
        let _sweeping = self.sweeping.lock().await;
        let mut spent = self.queue.take_for_sweep(all);
        // (One `DEL`'s keys must be ones the topology lets share a call.)
        let batches = protocol
            .connection()
            .batches(&mut spent, |l| l, LATCHES_PER_DEL);
        // A few `DEL`s at a time (see [`SWEEP_ROUNDS`]; on a cluster each slot's is its own),
        // without a future per slot held at once (thousands after a burst over many slots).
        let in_flight = batches.len().div_ceil(SWEEP_ROUNDS).max(1);
        let mut swept = true;
        for group in batches.chunks(in_flight) {
            let deletes = group
                .iter()
                .map(|batch| -> BoxFuture<'_, _> {
                    Box::pin(async move { (*batch, protocol.delete_latches(batch).await) })
                })
                .collect();
            for (batch, deleted) in join_all(deletes).await {
                if deleted.is_err() {
                    swept = false;
                    self.queue.put_back(batch.to_vec());
                }
            }
        }
        swept
    }

    /// [`SpentLatches::sweep`] again after each failure, pausing between tries, until every
    /// queued latch is deleted or `budget` has passed (a latch left then lingers for its PX).
    pub(crate) async fn sweep_until(&self, protocol: &Protocol, budget: Duration) -> bool {
        let deadline = Instant::now() + budget;
        let mut pause = LATCH_SWEEP;
        loop {
            if self.sweep(protocol).await {
                return true;
            }
            if Instant::now() + pause > deadline {
                tracing::warn!(
                    latches = self.queue.len(),
                    "spent latches could not be deleted; they expire by themselves"
                );
                return false;
            }
            crate::sync::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(400));
        }
    }
}

/// Deletes spent latches a sweep at a time until `shutdown`, then once more.
pub(crate) async fn run_latch_sweeper(
    protocol: Protocol,
    latches: Arc<SpentLatches>,
    shutdown: CancellationToken,
) {
    while !shutdown.is_cancelled() {
        // A sweep leaves the latches a write may yet carry, and puts back those whose `DEL`
        // failed: with any queued, look again after the next interval.
        if latches.queue.is_empty() {
            tokio::select! {
                _ = latches.queue.arrived.notified() => {}
                _ = shutdown.cancelled() => break,
            }
        }
        tokio::select! {
            _ = crate::sync::time::sleep(LATCH_SWEEP) => {}
            _ = shutdown.cancelled() => {}
        }
        latches.sweep_idle(&protocol).await;
    }
    latches.sweep(&protocol).await;
}
