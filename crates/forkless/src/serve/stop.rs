//! The stop signal of `serve` and `gateway`: Ctrl-C or SIGTERM, registered before the
//! start-up line.

use crate::Error;

/// Ctrl-C (SIGINT) or SIGTERM, whichever comes first.
pub(super) struct StopSignal {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignal {
    /// Register the handlers now, before the start-up line, so a supervisor that signals as
    /// soon as it reads that line gets a clean stop rather than the default disposition.
    pub(super) fn install() -> Result<Self, Error> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let interrupt = signal(SignalKind::interrupt()).map_err(Error::Startup)?;
            let terminate = signal(SignalKind::terminate()).map_err(Error::Startup)?;
            Ok(Self { interrupt, terminate })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    pub(super) async fn wait(mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "interrupted",
                _ = self.terminate.recv() => "terminated",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "interrupted"
        }
    }
}

/// Read the endpoint's TLS files again on every SIGHUP (they are also read again when they
/// change); a pair that does not load is logged and the current one stays.
pub(super) fn reload_on_hangup(identity: std::sync::Arc<forkless_server::TlsIdentity>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("SIGHUP handler not installed: TLS files are still read again when they change");
            return;
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                if let Err(e) = identity.reload() {
                    tracing::warn!(error = %e, "SIGHUP: TLS files do not load; still serving the previous certificate");
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = identity;
}
