//! The hint listener of one node: a subscription of its own to the store's hint channel,
//! handing every message to the store's [`HintSink`] and telling it each time it (re)connects
//! (hints published meanwhile are lost, so the sink re-reads everything watched). Ends when
//! the store is dropped.

use std::time::Duration;

use forkless_store::shared::HintSink;
use futures::StreamExt;

use crate::Redis;

pub(crate) async fn listen(sink: HintSink<Redis>, client: redis::Client, channel: String) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match client.get_async_pubsub().await {
            Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                Ok(()) => {
                    backoff = Duration::from_millis(100);
                    if !sink.connected().await {
                        return;
                    }
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        let Ok(payload) = message.get_payload::<String>() else { continue };
                        if !sink.hint(&payload).await {
                            return;
                        }
                    }
                    tracing::warn!("redis hint subscription ended; reconnecting");
                }
                Err(e) => tracing::warn!(error = %e, "redis SUBSCRIBE failed"),
            },
            Err(e) => tracing::warn!(error = %e, "redis hint listener cannot connect"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
