//! `Continuation::Proven`: a request's stream goes on only through a verified continuation;
//! anything else fails the request with `Error::Unproven` and hands nothing twice.

mod support;

use std::time::Duration;

use forkless_client::{Client, ClientBuilder, ClientEvent, Continuation, Error};
use serde_json::{Value, json};
use support::fake::{Conn, Dialect, FakeConfig, FakeServer, Resume};
use support::{GUARD, events_until, messages};

fn proven(server: &FakeServer) -> ClientBuilder {
    Client::builder(server.url())
        .retry_budget(Duration::from_secs(10))
        .backoff(Duration::from_millis(5), Duration::from_millis(50))
        .jitter_seed(7)
        .continuation(Continuation::Proven)
}

async fn numbered(client: &Client, count: u64) -> Result<Value, Error> {
    tokio::time::timeout(GUARD, client.call_tool("numbered", json!({"count": count}))).await.expect("guard")
}

/// The events the application saw up to the request's stream failing.
async fn until_failed(events: &mut forkless_client::Notifications) -> Vec<ClientEvent> {
    events_until(events, |e| matches!(e, ClientEvent::StreamFailed { .. })).await
}

#[tokio::test]
async fn a_verified_continuation_goes_on() {
    let server = FakeServer::start(FakeConfig::default()).await;
    server.next_post_conn(Conn::CloseAfter(2));
    server.next_resume(Resume::Honest);
    let client = proven(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result = numbered(&client, 4).await.expect("a proven continuation keeps the request");
    assert_eq!(result.pointer("/content/0/text").and_then(Value::as_str), Some("done"));
    let seen = events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["#4"]).await;
    assert_eq!(messages(&seen), ["#1", "#2", "#3", "#4"]);
}

#[tokio::test]
async fn a_new_stream_fails_the_request_instead_of_replaying_it() {
    let server = FakeServer::start(FakeConfig::default()).await;
    server.next_post_conn(Conn::CloseAfter(3));
    server.next_resume(Resume::ResumedFalse);
    let client = proven(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let err = numbered(&client, 4).await.expect_err("a new stream is no continuation");
    assert!(matches!(&err, Error::Unproven(why) if why.contains("answered by")), "{err:?}");
    let seen = until_failed(&mut events).await;
    // What came before the cut, once; nothing of the new stream (which starts again at #1).
    assert_eq!(messages(&seen), ["#1", "#2"]);
    // Following the new stream instead (the default) replays #1 and #2: the fork this refuses.
    let follow = Client::builder(server.url())
        .backoff(Duration::from_millis(5), Duration::from_millis(50))
        .jitter_seed(7)
        .connect()
        .await
        .unwrap();
    let mut followed = follow.notifications().unwrap();
    server.next_post_conn(Conn::CloseAfter(3));
    server.next_resume(Resume::ResumedFalse);
    numbered(&follow, 4).await.expect("followed");
    let seen = events_until(&mut followed, |e| messages(std::slice::from_ref(e)) == ["#4"]).await;
    assert_eq!(messages(&seen), ["#1", "#2", "#1", "#2", "#3", "#4"]);
}

#[tokio::test]
async fn a_resume_a_plain_server_cannot_prove_fails_the_request() {
    let server = FakeServer::start(FakeConfig { dialect: Dialect::Plain, ..FakeConfig::default() }).await;
    server.next_post_conn(Conn::CloseAfter(3));
    let client = proven(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let err = numbered(&client, 4).await.expect_err("an unverifiable resume is no proven continuation");
    assert!(matches!(&err, Error::Unproven(why) if why.contains("without naming")), "{err:?}");
    let seen = until_failed(&mut events).await;
    assert_eq!(messages(&seen), ["#1", "#2"]);
}
