//! PROTOCOL section 4, row by row, over real HTTP, with the seed scenario ([`rows`]); POST
//! streams resumed by GET, polling, and a stream's life around its resumes ([`streams`]).
//! This file holds what they share.

#[path = "../common/mod.rs"]
mod common;
mod rows;
mod streams;

use std::time::Duration;

use common::{Client, Sse, TestServer, assert_refused};
use forkless_core::{Attachment, EndReason, RejectReason, ResumeMode};
use forkless_server::{SendError, ServerConfig};
use serde_json::{Value, json};

/// Emit `n` numbered notifications on the session's standalone stream (through a request).
async fn emit_standalone(c: &Client, n: u64) {
    let resp = c.call(100, "standalone", json!({ "n": n })).await;
    let mut sse = Sse::new(resp);
    let rest = sse.rest().await;
    assert_eq!(
        rest.last().map(|e| e.json()["result"].clone()),
        Some(json!({})),
        "the emitting request succeeded"
    );
}

/// Wait until the session's standalone stream has no live connection.
async fn wait_standalone_detached(srv: &TestServer, c: &Client) {
    srv.wait_record(c.sid(), "the standalone stream to be detached", |r| {
        !matches!(r.standalone().attachment(), Some(Attachment::Attached(_)))
    })
    .await;
}

/// Open the standalone stream and read its priming event.
async fn open_standalone(c: &Client) -> Sse {
    let mut sse = Sse::new(c.resume(None, None).await);
    assert_eq!(sse.resumed.as_deref(), Some("false"));
    let priming = sse.next_block().await.expect("priming");
    let stream = sse.stream_id.clone().unwrap();
    assert_eq!(priming.id.as_deref(), Some(format!("{stream}.0").as_str()));
    assert_eq!(priming.data.as_deref(), Some(""));
    assert_eq!(priming.retry, Some(1000));
    sse
}
