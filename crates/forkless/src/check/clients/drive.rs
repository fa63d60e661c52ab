//! `forkless drive URL`: the `forkless-client` driver for `forkless check --client` (hidden from
//! the command's help). It calls the tool `numbers` once, as a careful application would:
//! streams resumed only through a proven continuation ([`Continuation::Proven`]), and prints
//! what it received in the driver protocol, one JSON object per line.

use futures::FutureExt as _;
use serde_json::json;

use forkless_client::{Client, ClientEvent, Continuation, Notifications};

use crate::Error;

/// Call `numbers` on `url` and print what arrives.
pub fn run(url: &str) -> Result<(), Error> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(Error::Startup)?;
    runtime.block_on(async {
        let client = match Client::builder(url).continuation(Continuation::Proven).connect().await {
            Ok(client) => client,
            Err(e) => {
                println!("{}", json!({ "error": e.to_string() }));
                return Ok(());
            }
        };
        let mut events = client.notifications().map_err(|e| Error::Probe(e.to_string()))?;
        let call = client.call_tool("numbers", json!({ "count": 8 }));
        tokio::pin!(call);
        let outcome = loop {
            tokio::select! {
                outcome = &mut call => break outcome,
                Some(event) = events.recv() => print(&event),
            }
        };
        // Notifications that came before the answer are queued already: print them first.
        drain(&mut events);
        match outcome {
            Ok(result) => println!("{}", json!({ "result": result })),
            Err(e) => println!("{}", json!({ "error": format!("{} ({e})", e.reason()) })),
        }
        let _ = client.close().await;
        Ok(())
    })
}

fn drain(events: &mut Notifications) {
    while let Some(Some(event)) = events.recv().now_or_never() {
        print(&event);
    }
}

fn print(event: &ClientEvent) {
    if let ClientEvent::Notification(n) = event {
        println!("{}", json!({ "notification": n.method, "params": n.params }));
    }
}
