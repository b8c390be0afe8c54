//! What the model checks run the engine on (`model` feature only): an in-memory stand-in for a
//! Redis server ([`server`]) that carries out the scripts' effects on Redisson's layouts, kept
//! honest by a differential test against the real scripts on a real server
//! (`tests/model_server.rs`).

pub mod link;
pub mod server;
