//! The connection side, the seam between the lock kinds and the topology: the command
//! [`Connection`] (standalone now; cluster and sentinel are variants to add, with no change to
//! the kinds or the engine), how many keys one call may carry ([`slots`]), and the
//! subscription hub every waiter of a client shares ([`pubsub`]).

pub(crate) mod connect;
mod connection;
pub(crate) mod pubsub;
pub(crate) mod slots;

pub(crate) use connection::Connection;
