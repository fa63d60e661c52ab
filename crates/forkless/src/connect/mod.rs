//! `forkless connect URL`: a stdio ↔ Streamable HTTP bridge an MCP host launches as its
//! server command. The host writes newline-delimited JSON-RPC to its stdin and reads its
//! stdout; the bridge carries each message to the server at `URL` and never hands the host a
//! fork: a cut stream is resumed only through a proven continuation, duplicates are dropped,
//! and a request whose stream cannot be continued fails with its own id (`data.reason`) while
//! the host is told why (a `notifications/message` and stderr).
//!
//! ```text
//! host ──stdin──► connect::run ──► era::Sessions (forkless-client, 2025-03-26…2025-11-25)
//!      ◄─stdout── host::Host   ──► era::Current  (2026-07-28: keys, tasks polled)
//! ```
//!
//! The era is the server's: 2026-07-28 where `server/discover` offers it (with `--revision
//! auto`, the default), the session revisions otherwise. This module owns the flags and the
//! message loop; `host` the framing, `sessions` and `current` the two eras.

mod current;
mod host;
mod oauth;
mod sessions;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::Error;
use host::{FromHost, Host, INVALID_REQUEST};

/// `forkless connect` flags.
#[derive(Clone, Debug, Args)]
pub struct ConnectArgs {
    /// The server's MCP endpoint, `http(s)://host/mcp`.
    pub url: String,
    /// A header sent with every request, `Name: value` (repeatable), e.g. an API key.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// A file holding a bearer token, sent as `Authorization: Bearer …` (read once, trimmed).
    #[arg(long, value_name = "PATH")]
    pub bearer_token_file: Option<PathBuf>,
    /// A CA file (PEM) trusted for `https://`, beside the system's roots.
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Which revision to speak to the server: `auto` (2026-07-28 where the server offers it),
    /// `sessions` (2025-03-26 to 2025-11-25 only) or `2026-07-28`.
    #[arg(long, value_enum, default_value_t = Era::Auto)]
    pub revision: Era,
    /// How long one request may take, in seconds, before it fails with `timeout`.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub request_timeout: u64,
    /// Where OAuth tokens are kept (mode 0600). Default: one file per server under
    /// `$XDG_STATE_HOME/forkless/oauth/` (or `~/.local/state/…`).
    #[arg(long, value_name = "PATH")]
    pub oauth_token_file: Option<PathBuf>,
    /// An OAuth client id registered beforehand. Default: dynamic client registration.
    #[arg(long, value_name = "ID")]
    pub oauth_client_id: Option<String>,
    /// The loopback port the authorization server redirects to. Default 0 (any free port).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub oauth_redirect_port: u16,
    /// The OAuth scopes to ask for. Default: those the server's challenge or metadata names.
    #[arg(long, value_name = "SCOPES")]
    pub oauth_scope: Option<String>,
}

/// Which revision the bridge speaks to the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Era {
    /// 2026-07-28 where `server/discover` offers it, the session revisions otherwise.
    #[default]
    Auto,
    /// The session revisions (2025-03-26 to 2025-11-25).
    Sessions,
    /// 2026-07-28 only.
    #[value(name = "2026-07-28")]
    Current,
}

/// Run the bridge on this process's stdin and stdout until the host closes stdin (exit 0) or
/// the server ends the session (exit 1).
pub fn run(args: &ConnectArgs) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::Startup)?;
    runtime.block_on(bridge(args, tokio::io::stdin(), tokio::io::stdout()))
}

/// The server behind the bridge, in its era.
#[derive(Debug)]
enum Upstream {
    Sessions(sessions::Sessions),
    Current(current::Current),
}

impl Upstream {
    async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, forkless_client::Error> {
        match self {
            Self::Sessions(s) => s.request(method, params).await,
            Self::Current(c) => c.request(method, params).await,
        }
    }
}

/// The bridge between `input`/`output` (the host) and `args.url` (the server).
pub async fn bridge(
    args: &ConnectArgs,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> Result<(), Error> {
    let http = http_client(args)?;
    // A server that requires a token gets one before the host's first message is read (the
    // user may have to authorize in a browser).
    let credentials = credentials(args, &http).await?;
    let (host, writing) = Host::new(output);
    let mut lines = BufReader::new(input).lines();
    let ended = CancellationToken::new();
    // Until the host's initialize, nothing can be forwarded.
    let upstream = loop {
        let Some(line) = next_line(&mut lines).await? else { return Ok(()) };
        match FromHost::parse(&line) {
            Err(answer) => host.send(answer),
            Ok(FromHost::Request { id, method, params }) if method == "initialize" => {
                let init = params.unwrap_or_else(|| json!({}));
                match open(args, &http, credentials.clone(), &host, &init, ended.clone()).await {
                    Ok((upstream, result)) => {
                        host.send(json!({ "jsonrpc": "2.0", "id": id, "result": result }));
                        break Arc::new(upstream);
                    }
                    Err(e) => {
                        host.answer(&id, Err(e.clone()));
                        drop(host);
                        let _ = writing.await;
                        return Err(Error::Probe(format!("cannot reach the server at {}: {e}", args.url)));
                    }
                }
            }
            Ok(FromHost::Request { id, method, .. }) if method == "ping" => host.answer(&id, Ok(json!({}))),
            Ok(FromHost::Request { id, method, .. }) => host.send(host::error_message(
                &id,
                INVALID_REQUEST,
                &format!("{method} before initialize"),
                None,
            )),
            Ok(other) => tracing::debug!(?other, "a message before initialize; dropped"),
        }
    };
    let inflight: Arc<Mutex<HashMap<String, AbortHandle>>> = Arc::default();
    let mut tasks = JoinSet::new();
    let outcome = loop {
        let line = tokio::select! {
            biased;
            () = ended.cancelled() => break Err(Error::Verdict("the server ended the session".into())),
            line = next_line(&mut lines) => line?,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let Some(line) = line else { break Ok(()) };
        match FromHost::parse(&line) {
            Err(answer) => host.send(answer),
            Ok(FromHost::Response { id, outcome }) => host.answered(&id, outcome),
            Ok(FromHost::Notification { method, params }) => {
                if method == "notifications/cancelled" {
                    let key = params.as_ref().and_then(|p| p.get("requestId")).map(Value::to_string);
                    if let Some(task) = key.and_then(|k| lock(&inflight).remove(&k)) {
                        // Dropping the request tells the server under the client's own id
                        // (notifications/cancelled, or the connection closing); the host's
                        // id means nothing there (it may name another request), so the
                        // host's notification itself goes no further. No answer is owed.
                        task.abort();
                    }
                } else if let Upstream::Sessions(s) = &*upstream {
                    s.notify(&method, params).await;
                }
            }
            Ok(FromHost::Request { id, method, params }) => {
                let (upstream, host, key) = (upstream.clone(), host.clone(), id.to_string());
                let (timeout, table) = (Duration::from_secs(args.request_timeout), inflight.clone());
                let done = key.clone();
                // Held while the task is spawned, so its own removal comes after this insert.
                let mut running = lock(&inflight);
                let handle = tasks.spawn(async move {
                    let outcome = match tokio::time::timeout(timeout, upstream.request(&method, params)).await
                    {
                        Ok(outcome) => outcome,
                        Err(_) => Err(forkless_client::Error::Timeout(timeout)),
                    };
                    lock(&table).remove(&done);
                    host.answer(&id, outcome);
                });
                running.insert(key, handle);
            }
        }
    };
    // Requests still running get their answers (or fail with the session) before the end.
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(5), drain).await.is_err() {
        tasks.abort_all();
    }
    host.gone();
    // The host may have closed stdin just as the server ended the session: still an end.
    let outcome = match (&*upstream, outcome) {
        (Upstream::Sessions(s), Ok(())) => match s.ended() {
            Some(e) => Err(Error::Verdict(format!("the server ended the session: {e}"))),
            None => Ok(()),
        },
        (_, outcome) => outcome,
    };
    if let Upstream::Sessions(s) = &*upstream {
        s.finish(outcome.is_ok()).await;
    }
    drop(host);
    drop(upstream);
    let _ = tokio::time::timeout(Duration::from_secs(5), writing).await;
    outcome
}

/// Open the server in its era with the host's `initialize` params.
async fn open(
    args: &ConnectArgs,
    http: &reqwest::Client,
    credentials: Option<Arc<dyn forkless_client::Credentials>>,
    host: &Host,
    init: &Value,
    ended: CancellationToken,
) -> Result<(Upstream, Value), forkless_client::Error> {
    if args.revision != Era::Sessions {
        match current::Current::open(&args.url, http.clone(), credentials.clone(), host, init).await {
            Ok((c, result)) => return Ok((Upstream::Current(c), result)),
            Err(e) if args.revision == Era::Current => return Err(e),
            Err(e) => tracing::debug!(error = %e, "no 2026-07-28 here; speaking the session revisions"),
        }
    }
    let mut builder = forkless_client::Client::builder(args.url.clone()).http_client(http.clone());
    if let Some(credentials) = credentials {
        builder = builder.credentials(credentials);
    }
    let (s, result) = sessions::Sessions::open(builder, host, init, ended).await?;
    Ok((Upstream::Sessions(s), result))
}

/// The bearer token file's token; else OAuth credentials when the server asks for a token and
/// no `Authorization` header was given.
async fn credentials(
    args: &ConnectArgs,
    http: &reqwest::Client,
) -> Result<Option<Arc<dyn forkless_client::Credentials>>, Error> {
    if let Some(path) = &args.bearer_token_file {
        let token = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("--bearer-token-file {}: {e}", path.display())))?;
        let bearer = forkless_client::credentials::Bearer::new(token.trim()).ok_or_else(|| {
            Error::Config(format!(
                "--bearer-token-file {}: not a token (it must be one line of text)",
                path.display()
            ))
        })?;
        return Ok(Some(Arc::new(bearer)));
    }
    let given = args
        .headers
        .iter()
        .any(|h| h.split(':').next().is_some_and(|n| n.trim().eq_ignore_ascii_case("authorization")));
    if given {
        return Ok(None);
    }
    let Some(challenge) = oauth::challenge(http, &args.url).await? else { return Ok(None) };
    let settings = oauth::OAuthSettings {
        token_file: args.oauth_token_file.clone(),
        client_id: args.oauth_client_id.clone(),
        redirect_port: args.oauth_redirect_port,
        scope: args.oauth_scope.clone(),
    };
    // The authorization server gets none of the server's own headers (`--header`).
    let plain = forkless_client::tls::trusting(reqwest::Client::builder(), args.ca_file.as_deref())
        .and_then(|b| b.build().map_err(forkless_client::Error::from))
        .map_err(|e| Error::Config(format!("the HTTP client: {e}")))?;
    let signed_in = oauth::sign_in(http, &plain, &args.url, &challenge, &settings).await?;
    Ok(Some(signed_in))
}

/// The HTTP client every request goes out on: the headers given, the CA.
fn http_client(args: &ConnectArgs) -> Result<reqwest::Client, Error> {
    let headers = crate::gateway::upstream::parse_headers("--header", &args.headers)?;
    let builder =
        reqwest::Client::builder().default_headers(headers).connect_timeout(Duration::from_secs(10));
    forkless_client::tls::trusting(builder, args.ca_file.as_deref())
        .and_then(|b| b.build().map_err(forkless_client::Error::from))
        .map_err(|e| Error::Config(format!("the HTTP client: {e}")))
}

/// The host's next non-empty line; `None` when it closed stdin.
async fn next_line<R: AsyncRead + Unpin>(
    lines: &mut tokio::io::Lines<BufReader<R>>,
) -> Result<Option<String>, Error> {
    loop {
        match lines.next_line().await.map_err(Error::Startup)? {
            None => return Ok(None),
            Some(line) if line.trim().is_empty() => {}
            Some(line) => return Ok(Some(line)),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
