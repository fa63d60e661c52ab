//! Test support shared by the integration tests: a scripted fake server and a fault-injecting
//! TCP proxy. Each test binary uses a different subset, hence the allowances.
#![allow(dead_code, unreachable_pub)]

pub mod fake;
pub mod proxy;

use std::time::Duration;

use forkless_client::{ClientEvent, Notifications};

/// A failure guard for awaits that should finish promptly (never a synchronisation device).
pub const GUARD: Duration = Duration::from_secs(20);

/// The next event, or a panic after [`GUARD`].
pub async fn next_event(events: &mut Notifications) -> ClientEvent {
    tokio::time::timeout(GUARD, events.recv()).await.expect("event within the guard").expect("client alive")
}

/// Collect events until `done` says stop (inclusive), guarded.
pub async fn events_until(
    events: &mut Notifications,
    mut done: impl FnMut(&ClientEvent) -> bool,
) -> Vec<ClientEvent> {
    let mut out = Vec::new();
    loop {
        let e = next_event(events).await;
        let stop = done(&e);
        out.push(e);
        if stop {
            return out;
        }
    }
}

/// The `data` texts of `notifications/message` events, in order.
pub fn messages(events: &[ClientEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Notification(n) if n.method == "notifications/message" => {
                n.params.as_ref()?.get("data")?.as_str().map(str::to_owned)
            }
            _ => None,
        })
        .collect()
}
