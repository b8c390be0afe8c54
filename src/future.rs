//! Futures the layers box and join: an acquire in flight, an unlock with a hand-off, a
//! renewal batch, each master's write of a cycle, each slot's `DEL` of a sweep.

/// A boxed future the engine keeps or hands to its background task (an acquire in flight, an
/// unlock with a hand-off, a renewal batch).
pub(crate) type BoxFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Awaits every future at once (each master's write of a cycle, each slot's `DEL` of a sweep);
/// outputs in the order they finish.
pub(crate) async fn join_all<'a, T>(futures: Vec<BoxFuture<'a, T>>) -> Vec<T> {
    let mut pending: Vec<Option<BoxFuture<'a, T>>> = futures.into_iter().map(Some).collect();
    let mut done = Vec::with_capacity(pending.len());
    std::future::poll_fn(|cx| {
        for slot in pending.iter_mut() {
            if let Some(write) = slot {
                if let std::task::Poll::Ready(out) = write.as_mut().poll(cx) {
                    done.push(out);
                    *slot = None;
                }
            }
        }
        if pending.iter().all(Option::is_none) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    done
}
