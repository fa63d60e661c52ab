//! Listen notifications (2026-07-28 `subscriptions/listen`): a handler announces a change
//! (`RequestContext::notify_listeners`, `Server::notify_listeners`), the store carries it to
//! every node sharing it (`forkless_store::Publishing::publish`, promise 10), and each listen stream
//! passes on what its acknowledged filter admits, tagged with its subscription id.
//!
//! This module owns the announcement and the filter. The listen stream is
//! `crate::stateless::listen`'s; how a message reaches other nodes is the store's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use forkless_store::Publishing;
use serde_json::{Value, json};

use crate::session::SendError;

/// The `_meta` key naming the subscription a message belongs to.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Where an announcement goes: the store, behind a type the handles can hold.
pub(crate) trait Publish: Send + Sync {
    fn publish(
        &self,
        message: Bytes,
    ) -> Pin<Box<dyn Future<Output = forkless_store::Result<()>> + Send + '_>>;
}

impl<S: Publishing> Publish for Arc<S> {
    fn publish(
        &self,
        message: Bytes,
    ) -> Pin<Box<dyn Future<Output = forkless_store::Result<()>> + Send + '_>> {
        Box::pin(async move { self.as_ref().publish(message).await })
    }
}

/// Announce `method` with `params` to every listener whose filter admits it, on every node.
pub(crate) async fn announce(to: &dyn Publish, method: &str, params: Value) -> Result<(), SendError> {
    let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
    to.publish(Bytes::from(message.to_string())).await.map_err(|e| SendError::Store(e.to_string()))
}

/// Whether a listen stream with acknowledged `filter` passes on `message`.
pub(crate) fn admits(filter: &Value, message: &Value) -> bool {
    let flag = |field: &str| filter.get(field).and_then(Value::as_bool) == Some(true);
    match message.get("method").and_then(Value::as_str) {
        Some("notifications/tools/list_changed") => flag("toolsListChanged"),
        Some("notifications/prompts/list_changed") => flag("promptsListChanged"),
        Some("notifications/resources/list_changed") => flag("resourcesListChanged"),
        Some("notifications/resources/updated") => {
            let uri = message.pointer("/params/uri");
            let uris = filter.get("resourceSubscriptions").and_then(Value::as_array);
            uris.is_some_and(|uris| uris.iter().any(|u| Some(u) == uri))
        }
        _ => false,
    }
}

/// `message` as subscription `id` sends it: its `_meta` names the subscription.
pub(crate) fn tagged(mut message: Value, id: &Value) -> Value {
    if !message.get("params").is_some_and(Value::is_object) {
        message["params"] = json!({});
    }
    let params = &mut message["params"];
    if !params.get("_meta").is_some_and(Value::is_object) {
        params["_meta"] = json!({});
    }
    params["_meta"][SUBSCRIPTION_ID] = id.clone();
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_admits_what_it_names_and_nothing_else() {
        let filter = json!({ "toolsListChanged": true, "resourceSubscriptions": ["file:///a"] });
        let note =
            |method: &str, params: Value| json!({ "jsonrpc": "2.0", "method": method, "params": params });
        assert!(admits(&filter, &note("notifications/tools/list_changed", json!({}))));
        assert!(!admits(&filter, &note("notifications/prompts/list_changed", json!({}))));
        assert!(admits(&filter, &note("notifications/resources/updated", json!({ "uri": "file:///a" }))));
        assert!(!admits(&filter, &note("notifications/resources/updated", json!({ "uri": "file:///b" }))));
        assert!(!admits(&filter, &note("notifications/message", json!({}))), "never anything else");
        let tagged = tagged(note("notifications/tools/list_changed", json!(null)), &json!(7));
        assert_eq!(tagged["params"]["_meta"][SUBSCRIPTION_ID], 7);
    }
}
