//! The hub's task on the model checks' stand-in server (`model` feature only): the same
//! duties as [`super::single`]'s over one connection (subscribe what waiters and watchers ask
//! for, confirm it, dispatch messages, let idle channels go), with no network: the stand-in
//! delivers a message by calling the hub as it publishes it.

use std::sync::{Arc, Weak};

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Command, Hub};
use crate::model::link::Link;
use crate::model::server::{Listener, Server};
use crate::sync::atomic::Ordering;

/// Serves the hub on `link`'s server until `shutdown`.
pub(super) async fn run(
    hub: Arc<Hub>,
    link: Link,
    mut commands: mpsc::UnboundedReceiver<Command>,
    shutdown: CancellationToken,
) {
    let server = link.server().clone();
    let to: Weak<Hub> = Arc::downgrade(&hub);
    let listener: Listener = Arc::new(move |channel: &str, payload: &[u8]| {
        if let Some(hub) = to.upgrade() {
            hub.dispatch(channel.as_bytes(), payload);
        }
    });
    let mut conn = connect(&hub, &server, &listener);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = link.pubsub_cut() => {
                // As single.rs does when its connection fails: nothing is confirmed until the
                // new connection has subscribed everything again and woken every waiter.
                server.disconnect_pubsub(conn);
                hub.connected.store(false, Ordering::Release);
                hub.set_all_ready(false);
                crate::sync::yield_now().await;
                conn = connect(&hub, &server, &listener);
            }
            command = commands.recv() => {
                let Some(first) = command else { break };
                let mut channels = first.batch(&mut commands);
                channels.retain(|channel| hub.is_wanted(channel));
                // (The subscription is a round trip: others run meanwhile.)
                crate::sync::yield_now().await;
                for channel in &channels {
                    server.subscribe(conn, channel);
                }
                crate::sync::yield_now().await;
                hub.mark_all_ready(&channels);
                // (Time does not pass in a model: whatever went idle has lingered enough.)
                for channel in hub.take_idle(Instant::now()) {
                    server.unsubscribe(conn, &channel);
                }
            }
        }
    }
    server.disconnect_pubsub(conn);
    hub.connected.store(false, Ordering::Release);
    hub.wake_all();
}

/// A new pub/sub connection with every wanted channel subscribed, confirmed, and every waiter
/// woken (a message may have gone while there was none).
fn connect(hub: &Hub, server: &Server, listener: &Listener) -> usize {
    let conn = server.connect_pubsub(listener.clone());
    let channels = hub.channel_names();
    for channel in &channels {
        server.subscribe(conn, channel);
    }
    hub.connected.store(true, Ordering::Release);
    hub.mark_all_ready(&channels);
    hub.wake_all();
    conn
}
