//! A node's hint listener, written once for every database: one subscription of its own to
//! the database's hint channel ([`HintSource`]), every hint handed to the store's
//! [`HintSink`], the sink told each time the subscription is (re)made (hints sent meanwhile
//! are lost, so it re-reads everything watched), and a lost subscription made again after a
//! backoff. Ends when the store is dropped.
//!
//! A database owns only how it subscribes and how a hint arrives; the reconnecting, the
//! backoff and what a hint does are this module's and [`super::hub`]'s.

use core::future::Future;
use core::time::Duration;

use super::{Database, HintSink};
use crate::Result;

/// The first wait before subscribing again, doubled after each failure up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait before subscribing again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Where a database's hints arrive.
pub trait HintSource: Send + 'static {
    /// One subscription: a connection of its own, subscribed.
    type Subscription: Send;
    /// The database's name in log lines (`postgres`, `redis`).
    const NAME: &'static str;
    /// Connect and subscribe to the hint channel.
    fn subscribe(&mut self) -> impl Future<Output = Result<Self::Subscription>> + Send;
    /// The next hint's payload; `None` once the subscription ended (its connection broke).
    fn next(subscription: &mut Self::Subscription) -> impl Future<Output = Option<String>> + Send;
}

/// Hand every hint `source` receives to `sink`, subscribing again whenever the subscription
/// is lost; ends once the store is gone.
pub async fn listen<D: Database, H: HintSource>(sink: HintSink<D>, mut source: H) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match source.subscribe().await {
            Ok(mut subscription) => {
                backoff = FIRST_BACKOFF;
                if !sink.connected().await {
                    return;
                }
                while let Some(payload) = H::next(&mut subscription).await {
                    if !sink.hint(&payload).await {
                        return;
                    }
                }
                tracing::warn!(database = H::NAME, "hint subscription ended; subscribing again");
            }
            Err(e) => tracing::warn!(database = H::NAME, error = %e, "hint subscription failed"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
