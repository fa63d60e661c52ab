//! The endpoint over TLS, with a certificate this test makes (rcgen) and a client that trusts
//! only it: MCP on HTTP/2 and HTTP/1.1 as ALPN chooses, a cut stream resumed gap-free over
//! HTTP/2, a certificate replaced on disk served to the next connection while an open stream
//! goes on, and bad input (plaintext on the TLS port, a key of another certificate, an
//! expired certificate, a file without one) refused with clear errors while the listener
//! serves on.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use common::{TestServer, counter};
use forkless_server::{ConfigError, ServerConfig, TlsIdentity, Transport};
use http::{Request, Response};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A self-signed certificate for `localhost` written to `dir` as `NAME.crt` and `NAME.key`.
fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf, CertificateDer<'static>) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
    let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key, made.cert.der().clone())
}

async fn tls_server(cert: &Path, key: &Path) -> (TestServer, Arc<TlsIdentity>) {
    let identity = Arc::new(TlsIdentity::load(cert, key).expect("identity"));
    let config = ServerConfig { transport: Transport::Tls(identity.clone()), ..ServerConfig::default() };
    (TestServer::start(config).await, identity)
}

/// A connection that trusts `root` only, offering `alpn`.
struct Conn {
    send: Send,
    authority: String,
    peer: CertificateDer<'static>,
    protocol: Vec<u8>,
}

enum Send {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

async fn connect(addr: SocketAddr, root: &CertificateDer<'static>, alpn: &[u8]) -> std::io::Result<Conn> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await?;
    let (_, session) = tls.get_ref();
    let protocol = session.alpn_protocol().unwrap_or_default().to_vec();
    let peer = session.peer_certificates().expect("a certificate")[0].clone().into_owned();
    let io = TokioIo::new(tls);
    let send = if protocol == b"h2" {
        let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await.unwrap();
        tokio::spawn(conn);
        Send::H2(send)
    } else {
        let (send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        Send::H1(send)
    };
    Ok(Conn { send, authority: format!("localhost:{}", addr.port()), peer, protocol })
}

impl Conn {
    async fn send(
        &mut self,
        method: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Response<Incoming> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("https://{}/mcp", self.authority))
            .header("host", &self.authority)
            .header("accept", "application/json, text/event-stream");
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = Full::new(Bytes::from(body.map(Value::to_string).unwrap_or_default()));
        let request = request.body(body).unwrap();
        match &mut self.send {
            Send::H1(send) => {
                send.ready().await.unwrap();
                send.send_request(request).await.unwrap()
            }
            Send::H2(send) => {
                send.ready().await.unwrap();
                send.send_request(request).await.unwrap()
            }
        }
    }

    async fn initialize(&mut self) -> String {
        let body = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
        let response = self.send("POST", &[], Some(&body)).await;
        assert_eq!(response.status(), 200);
        let sid = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let _ = response.into_body().collect().await;
        sid
    }
}

fn session(sid: &str) -> [(&str, &str); 2] {
    [("mcp-session-id", sid), ("mcp-protocol-version", "2025-11-25")]
}

/// SSE events of a response as they arrive: `(id, data)`.
struct Events {
    body: Incoming,
    text: String,
}

impl Events {
    fn new(response: Response<Incoming>) -> Self {
        assert_eq!(response.status(), 200);
        Self { body: response.into_body(), text: String::new() }
    }

    /// The next event with data (priming events carry none); `None` at the end.
    async fn next(&mut self) -> Option<(String, Value)> {
        loop {
            while let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let field = |name: &str| {
                    block.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim_start().to_owned())
                };
                if let (Some(id), Some(data)) = (field("id:"), field("data:"))
                    && !data.is_empty()
                {
                    return Some((id, serde_json::from_str(&data).unwrap()));
                }
            }
            let frame = self.body.frame().await?.ok()?;
            if let Ok(data) = frame.into_data() {
                self.text.push_str(&String::from_utf8_lossy(&data).replace("\r\n", "\n"));
            }
        }
    }
}

#[tokio::test]
async fn mcp_is_served_over_tls_on_http2_and_http11_as_alpn_chooses() {
    let dir = tempfile_dir();
    let (cert, key, der) = certificate(dir.path(), "server");
    let (server, _) = tls_server(&cert, &key).await;
    for alpn in [&b"h2"[..], b"http/1.1"] {
        let mut conn = connect(server.addr, &der, alpn).await.expect("handshake");
        assert_eq!(conn.protocol, alpn, "ALPN chose the protocol offered");
        let sid = conn.initialize().await;
        let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "count", "params": { "n": 3 } });
        let mut events = Events::new(conn.send("POST", &session(&sid), Some(&call)).await);
        let mut seen = Vec::new();
        while let Some((_, data)) = events.next().await {
            seen.push(data);
        }
        assert_eq!(seen.len(), 4, "three notifications and the result: {seen:?}");
        assert_eq!(seen[3]["result"]["done"], 3, "{seen:?}");
    }
}

#[tokio::test]
async fn a_cut_stream_resumes_gap_free_over_http2() {
    let dir = tempfile_dir();
    let (cert, key, der) = certificate(dir.path(), "server");
    let (server, _) = tls_server(&cert, &key).await;
    let mut conn = connect(server.addr, &der, b"h2").await.unwrap();
    let sid = conn.initialize().await;
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "gated", "params": { "first": 2, "rest": 3 } });
    let mut events = Events::new(conn.send("POST", &session(&sid), Some(&call)).await);
    let (first, _) = events.next().await.unwrap();
    let (second, _) = events.next().await.unwrap();
    // The cut: the HTTP/2 stream is reset; the connection (and its other streams) stay.
    drop(events);
    server.controls.gate.add_permits(1);
    let headers = [session(&sid)[0], session(&sid)[1], ("last-event-id", second.as_str())];
    let mut resumed = Events::new(conn.send("GET", &headers, None).await);
    let mut after = Vec::new();
    while let Some((id, data)) = resumed.next().await {
        after.push((id, data));
    }
    let stream = first.split('.').next().unwrap();
    let ids: Vec<_> = after.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids, (3..=6).map(|n| format!("{stream}.{n}")).collect::<Vec<_>>(), "gap-free, once each");
    assert_eq!(after[3].1["result"]["done"], 5);
}

#[tokio::test]
async fn a_replaced_certificate_is_served_to_the_next_connection_while_an_open_stream_goes_on() {
    let dir = tempfile_dir();
    let (cert, key, old) = certificate(dir.path(), "server");
    let (server, identity) = tls_server(&cert, &key).await;
    let mut open = connect(server.addr, &old, b"h2").await.unwrap();
    let sid = open.initialize().await;
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "gated", "params": { "first": 1, "rest": 1 } });
    let mut events = Events::new(open.send("POST", &session(&sid), Some(&call)).await);
    events.next().await.expect("the first event");
    // Renewed in place (as certbot or cert-manager does), then read again (as on SIGHUP).
    let (_, _, new) = certificate(dir.path(), "server");
    identity.reload().expect("the new pair loads");
    let next = connect(server.addr, &new, b"h2").await.expect("the next connection gets the new certificate");
    assert_eq!(next.peer, new);
    assert!(connect(server.addr, &old, b"h2").await.is_err(), "the old certificate is no longer served");
    server.controls.gate.add_permits(1);
    let (_, second) = events.next().await.expect("the open stream goes on");
    assert_eq!(second["params"]["data"]["i"], 2, "{second}");
    let (_, result) = events.next().await.expect("to its result");
    assert_eq!(result["result"]["done"], 2, "{result}");
    assert_eq!(open.peer, old);
}

#[tokio::test]
async fn plaintext_on_the_tls_port_is_refused_and_the_listener_serves_on() {
    let dir = tempfile_dir();
    let (cert, key, der) = certificate(dir.path(), "server");
    let (server, _) = tls_server(&cert, &key).await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer).await;
    assert!(!answer.starts_with(b"HTTP/1.1 200"), "no plaintext answer");
    let mut conn = connect(server.addr, &der, b"h2").await.expect("a TLS client is still served");
    conn.initialize().await;
    let healthz = conn.send("GET", &[], None).await;
    drop(healthz);
    let m = tls_metrics(&server, &der).await;
    assert_eq!(counter(&m, "forkless_tls_handshake_failures_total"), 1, "{m}");
}

/// `/metrics` over TLS (the shared helper speaks plaintext).
async fn tls_metrics(server: &TestServer, root: &CertificateDer<'static>) -> String {
    let mut conn = connect(server.addr, root, b"http/1.1").await.unwrap();
    let request = Request::get(format!("https://{}/metrics", conn.authority))
        .header("host", &conn.authority)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let Send::H1(send) = &mut conn.send else { unreachable!("http/1.1 was offered") };
    let response = send.send_request(request).await.unwrap();
    String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

#[test]
fn files_that_cannot_serve_are_refused_with_what_is_wrong() {
    let dir = tempfile_dir();
    let (cert, key, _) = certificate(dir.path(), "a");
    let (_, other_key, _) = certificate(dir.path(), "b");
    let mismatch = TlsIdentity::load(&cert, &other_key).expect_err("another certificate's key");
    assert!(matches!(mismatch, ConfigError::TlsKeyMismatch { .. }), "{mismatch}");
    let missing = TlsIdentity::load(dir.path().join("none.crt"), &key).expect_err("no file");
    assert!(missing.to_string().contains("none.crt"), "{missing}");
    let empty = dir.path().join("empty.crt");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let empty = TlsIdentity::load(&empty, &key).expect_err("no certificate in it");
    assert!(empty.to_string().contains("holds no PEM certificate"), "{empty}");
    let no_key = TlsIdentity::load(&cert, &cert).expect_err("a certificate is not a key");
    assert!(no_key.to_string().contains("no usable private key"), "{no_key}");
    // Expired in 2021.
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let pair = rcgen::KeyPair::generate().unwrap();
    let expired = params.self_signed(&pair).unwrap();
    let (old_cert, old_key) = (dir.path().join("old.crt"), dir.path().join("old.key"));
    std::fs::write(&old_cert, expired.pem()).unwrap();
    std::fs::write(&old_key, pair.serialize_pem()).unwrap();
    let err = TlsIdentity::load(&old_cert, &old_key).expect_err("expired");
    assert!(matches!(err, ConfigError::TlsNotValidNow { .. }), "{err}");
    assert!(err.to_string().contains("2021-01-01T00:00:00Z"), "{err}");
}

fn tempfile_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

#[tokio::test]
async fn cleartext_takes_http2_with_prior_knowledge_and_http11_on_one_port() {
    let config = ServerConfig { transport: Transport::Cleartext, ..ServerConfig::default() };
    let server = TestServer::start(config).await;
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await.unwrap();
    tokio::spawn(conn);
    let mut h2 = Conn {
        send: Send::H2(send),
        authority: format!("localhost:{}", server.addr.port()),
        peer: CertificateDer::from(Vec::new()),
        protocol: b"h2".to_vec(),
    };
    let sid = h2.initialize().await;
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "count", "params": { "n": 2 } });
    let mut events = Events::new(h2.send("POST", &session(&sid), Some(&call)).await);
    let mut seen = 0;
    while events.next().await.is_some() {
        seen += 1;
    }
    assert_eq!(seen, 3, "two notifications and the result over h2c");
    // The same port still speaks HTTP/1.1.
    let mut plain = server.client();
    plain.initialize().await;
    assert_eq!(plain.call(2, "echo", json!({})).await.status(), 200);
}
