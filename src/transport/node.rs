//! Connections to one node and what their failures mean: the reconnecting command
//! connection to a server or a master, and the classification of connect errors.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::naming::Named;
use crate::config::Config;
use crate::error::{Error, Result};

/// The command connection to one server: reconnects by itself, a few quick retries, the
/// configured timeouts, and the client's name kept across reconnects.
pub(crate) async fn connect_manager(client: redis::Client, config: &Config) -> Result<Named> {
    let manager = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connect_timeout()))
        .set_response_timeout(Some(config.response_timeout()))
        .set_number_of_retries(3)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500));
    let conn = ConnectionManager::new_with_config(client, manager)
        .await
        .map_err(connect_error)?;
    Named::new(conn, config.conn_name.clone())
        .await
        .map_err(connect_error)
}

pub(crate) fn pubsub_error(err: redis::RedisError) -> Error {
    if err.kind() == redis::ErrorKind::RESP3NotSupported
        || err.to_string().contains("unknown command 'HELLO'")
    {
        return Error::Config(
            "the server does not speak RESP3 (HELLO 3 refused): waiting on locks needs Redis 6 or newer".into(),
        );
    }
    connect_error(err)
}

pub(crate) fn connect_error(err: redis::RedisError) -> Error {
    // (redis-rs has no kind for a refused login at `AUTH`/`HELLO`: `WRONGPASS` and `NOAUTH`
    // reach us as their codes.)
    if err.kind() == redis::ErrorKind::AuthenticationFailed
        || err.code() == Some("WRONGPASS")
        || err.code() == Some("NOAUTH")
    {
        return Error::Authentication(err);
    }
    if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm) {
        return Error::Redis(err);
    }
    Error::Connection(err)
}
