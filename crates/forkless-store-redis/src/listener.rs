//! Where a node's hints arrive from Redis: a subscription of its own to the store's hint
//! channel ([`HintSource`]); the listening loop is the shared layer's
//! ([`forkless_store::shared::listen`]).

use forkless_store::shared::HintSource;
use futures::StreamExt;

/// The client and channel the listener subscribes with.
pub(crate) struct Listener {
    pub(crate) client: redis::Client,
    pub(crate) channel: String,
}

impl HintSource for Listener {
    type Subscription = redis::aio::PubSubStream;
    const NAME: &'static str = "redis";

    async fn subscribe(&mut self) -> forkless_store::Result<Self::Subscription> {
        let backend = |e: redis::RedisError| forkless_store::Error::Backend(format!("redis: {e}"));
        let mut pubsub = self.client.get_async_pubsub().await.map_err(backend)?;
        pubsub.subscribe(&self.channel).await.map_err(backend)?;
        Ok(pubsub.into_on_message())
    }

    async fn next(subscription: &mut Self::Subscription) -> Option<String> {
        loop {
            let message = subscription.next().await?;
            if let Ok(payload) = message.get_payload::<String>() {
                return Some(payload);
            }
        }
    }
}
