//! The connection side: the subscription hub that every waiter of a client shares (`pubsub`).
//! The command connection is a redis-rs `ConnectionManager` held by `raw::rlock::Protocol`;
//! cluster and sentinel connections come here.

pub(crate) mod pubsub;
