//! Spent unlock latches and their sweeper.
//!
//! Once an unlock's answer is read its latch is spent (no re-send will come), but it would
//! linger until its PX runs out. Spent latches are gathered for [`LATCH_SWEEP`] and deleted
//! together in one `DEL`: under load that is one command per sweep instead of one per unlock,
//! and the unlock itself costs exactly its script call.

use std::sync::Arc;
use std::time::Duration;

use crate::sync::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::future::{join_all, BoxFuture};
use crate::names;
use crate::raw::Protocol;

/// Sends of one latched write ([`SpentLatches::send_once`]) before its caller hears of the error.
const ONCE_ATTEMPTS: u32 = 3;
const RESEND_PAUSE: Duration = Duration::from_millis(50);

/// How long spent latches are gathered before one `DEL` removes them (far inside their PX).
const LATCH_SWEEP: Duration = Duration::from_millis(50);
/// Most latches one `DEL` names.
const LATCHES_PER_DEL: usize = 512;
/// `DEL`s of a sweep sent before the first answer is awaited.
const DELS_IN_FLIGHT: usize = 64;

/// Unlock latches whose answers have been read, waiting for the next sweep.
#[derive(Default)]
pub(crate) struct SpentLatches {
    pending: Mutex<Pending>,
    /// Signalled when the first latch of a sweep arrives.
    arrived: Notify,
    /// Held by the sweep in flight: a sweep at shutdown must wait for the sweeper's, whose
    /// latches are out of `pending` until its `DEL`s answer (or are put back).
    sweeping: tokio::sync::Mutex<()>,
}

impl SpentLatches {
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
        let mut pending = self.pending.lock();
        pending.latches.push(latch);
        if pending.latches.len() == 1 {
            self.arrived.notify_one();
        }
        pending.closed
    }

    /// The client shuts down: the sweeper's last sweep comes next, and a latch spent after it
    /// is for its spender to sweep. (Under the queue's lock: a latch is either queued before
    /// the last sweep or swept by its spender.)
    pub(crate) fn close(&self) {
        self.pending.lock().closed = true;
    }

    /// Deletes every latch queued so far, each `DEL` confirmed. A `DEL` that fails puts its
    /// latches back for the next sweep (`false`): a latch left behind would linger for its
    /// whole PX, long after every fault has healed.
    pub(crate) async fn sweep(&self, protocol: &Protocol) -> bool {
        let _sweeping = self.sweeping.lock().await;
        let mut spent = std::mem::take(&mut self.pending.lock().latches);
        // (One `DEL`'s keys must be ones the topology lets share a call.)
        let batches = protocol
            .connection()
            .batches(&mut spent, |l| l, LATCHES_PER_DEL);
        // [`DELS_IN_FLIGHT`] at once: what is queued for one node goes out in one write (on a
        // cluster each slot's `DEL` is its own command), without a future per slot held at
        // once (thousands after a burst of acquires over many slots).
        let mut swept = true;
        for group in batches.chunks(DELS_IN_FLIGHT) {
            let deletes = group
                .iter()
                .map(|batch| -> BoxFuture<'_, _> {
                    Box::pin(async move { (*batch, protocol.delete_latches(batch).await) })
                })
                .collect();
            for (batch, deleted) in join_all(deletes).await {
                if deleted.is_err() {
                    swept = false;
                    self.pending.lock().latches.extend_from_slice(batch);
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
                    latches = self.pending.lock().latches.len(),
                    "spent latches could not be deleted; they expire by themselves"
                );
                return false;
            }
            crate::sync::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(400));
        }
    }
}

/// The latches waiting for a sweep, and whether the client has shut down.
#[derive(Default)]
struct Pending {
    latches: Vec<String>,
    closed: bool,
}

/// Deletes spent latches a sweep at a time until `shutdown`, then once more.
pub(crate) async fn run_latch_sweeper(
    protocol: Protocol,
    latches: Arc<SpentLatches>,
    shutdown: CancellationToken,
) {
    let mut swept = true;
    while !shutdown.is_cancelled() {
        // After a failed sweep the latches are still queued: retry without waiting for more.
        if swept {
            tokio::select! {
                _ = latches.arrived.notified() => {}
                _ = shutdown.cancelled() => break,
            }
        }
        tokio::select! {
            _ = crate::sync::time::sleep(LATCH_SWEEP) => {}
            _ = shutdown.cancelled() => {}
        }
        swept = latches.sweep(&protocol).await;
    }
    latches.sweep(&protocol).await;
}
