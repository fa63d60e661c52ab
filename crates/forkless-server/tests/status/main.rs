//! Every status code of the endpoint, over real HTTP, and bad input of every kind: JSON-RPC
//! shapes and bodies ([`requests`]), sessions, headers, origins and methods ([`endpoint`]),
//! and what a store's state turns into ([`store`]). This file holds what they share.

#[path = "../common/mod.rs"]
mod common;
mod endpoint;
mod requests;
mod store;

use common::{Client, Sse, TestServer, assert_refused, error_body};
use forkless_server::{AnswerMode, ServerConfig};
use forkless_store::Store as _;
use serde_json::{Value, json};

fn json_mode() -> ServerConfig {
    ServerConfig { answer: AnswerMode::Json, ..ServerConfig::default() }
}
