//! Where a node's hints arrive from PostgreSQL: a connection of its own doing `LISTEN
//! forkless` ([`HintSource`]); the listening loop is the shared layer's
//! ([`forkless_store::shared::listen`]).

use forkless_store::shared::HintSource;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

/// The database's connection settings, for the listener's own connection.
pub(crate) struct Listener {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: crate::tls::MakeTls,
}

/// A `LISTEN forkless` connection: its notifications, and the task driving it (stopped with
/// the subscription).
pub(crate) struct Subscription {
    payloads: mpsc::UnboundedReceiver<String>,
    driver: tokio::task::JoinHandle<()>,
    /// Kept open for the subscription's life: dropping it closes the connection.
    _client: tokio_postgres::Client,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl HintSource for Listener {
    type Subscription = Subscription;
    const NAME: &'static str = "postgres";

    async fn subscribe(&mut self) -> forkless_store::Result<Subscription> {
        let backend = |e: tokio_postgres::Error| forkless_store::Error::Backend(format!("postgres: {e}"));
        let (client, mut conn) = self.config.connect(self.tls.clone()).await.map_err(backend)?;
        let (tx, payloads) = mpsc::unbounded_channel();
        let driver = tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let AsyncMessage::Notification(n) = message
                    && tx.send(n.payload().to_owned()).is_err()
                {
                    break;
                }
            }
        });
        let subscription = Subscription { payloads, driver, _client: client };
        subscription._client.batch_execute("LISTEN forkless").await.map_err(backend)?;
        Ok(subscription)
    }

    async fn next(subscription: &mut Subscription) -> Option<String> {
        subscription.payloads.recv().await
    }
}
