//! The hint listener of one node: a connection of its own doing `LISTEN forkless`, handing
//! every notification to the store's [`HintSink`] and telling it each time it (re)connects
//! (hints sent meanwhile are lost, so the sink re-reads everything watched). Ends when the
//! store is dropped.

use std::time::Duration;

use forkless_store::shared::HintSink;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use crate::Postgres;

pub(crate) async fn listen(
    sink: HintSink<Postgres>,
    (config, tls): (tokio_postgres::Config, crate::tls::MakeTls),
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match config.connect(tls.clone()).await {
            Ok((client, mut conn)) => {
                let (tx, mut rx) = mpsc::unbounded_channel();
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
                match client.batch_execute("LISTEN forkless").await {
                    Ok(()) => {
                        backoff = Duration::from_millis(100);
                        if !sink.connected().await {
                            return;
                        }
                        while let Some(payload) = rx.recv().await {
                            if !sink.hint(&payload).await {
                                return;
                            }
                        }
                        tracing::warn!("postgres hint listener disconnected; reconnecting");
                    }
                    Err(e) => tracing::warn!(error = %e, "postgres LISTEN failed"),
                }
                driver.abort();
            }
            Err(e) => tracing::warn!(error = %e, "postgres hint listener cannot connect"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
