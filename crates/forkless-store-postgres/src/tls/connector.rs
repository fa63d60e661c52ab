//! The rustls connector tokio-postgres and the pool make every connection's handshake with.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

/// Makes a connector per connection, for its host (`None`: `sslmode=disable`, never asked).
#[derive(Clone, Debug)]
pub struct MakeTls(pub(crate) Option<Arc<rustls::ClientConfig>>);

/// One connection's handshake.
#[derive(Debug)]
pub struct Connector {
    config: Option<Arc<rustls::ClientConfig>>,
    name: ServerName<'static>,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> MakeTlsConnect<S> for MakeTls {
    type Stream = TlsStream<S>;
    type TlsConnect = Connector;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> Result<Connector, io::Error> {
        let name = ServerName::try_from(host.to_owned()).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("host {host:?} for TLS: {e}"))
        })?;
        Ok(Connector { config: self.0.clone(), name })
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> TlsConnect<S> for Connector {
    type Stream = TlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let config = self.config.ok_or_else(|| io::Error::other("TLS asked for with sslmode=disable"))?;
            let host = format!("{:?}", self.name);
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(self.name, stream)
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("TLS with {host}: {e}")))?;
            Ok(TlsStream(tls))
        })
    }
}

/// A TLS connection to the database.
#[derive(Debug)]
pub struct TlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for TlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}
