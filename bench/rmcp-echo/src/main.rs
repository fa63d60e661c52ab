//! A minimal MCP Streamable HTTP server on the official Rust SDK (rmcp), for the end-to-end
//! benchmarks only: the same tools the forkless bench server offers (`echo {text}` and
//! `start-notification-stream {count}`), served at `/mcp`.
//!
//! ```text
//! rmcp-echo [--listen 127.0.0.1:0] [--mode stateful|stateless]
//! ```
//!
//! `stateful`: sessions (`Mcp-Session-Id`), every request answered over SSE (rmcp's session
//! mode). `stateless`: no sessions, simple requests answered with `application/json`.
//! Prints `listening on http://ADDR/mcp` once bound.

// The notifications are `notifications/message` like the other servers send; rmcp marks its
// logging API deprecated (SEP-2577) but it is what the SDK peers use too.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

// The same allocator as the forkless servers under test, so the comparison is of the
// transports, not of malloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Clone)]
struct Echo;

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else { unreachable!("schemas are objects") };
    Tool::new(name, description, Arc::new(schema))
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let text = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        let count = json!({"type": "object", "properties": {"count": {"type": "integer"}}});
        Ok(ListToolsResult::with_all_items(vec![
            tool("echo", "Returns the given text unchanged.", text),
            tool("start-notification-stream", "Sends `count` log notifications, then answers.", count),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match &*request.name {
            "echo" => {
                let text = args.get("text").and_then(Value::as_str).unwrap_or_default().to_owned();
                Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
            }
            "start-notification-stream" => {
                // rmcp routes only progress notifications (by the request's progressToken) to
                // the request's own SSE stream; logging messages go to the standalone GET
                // stream. So this server sends `notifications/progress` (the client sends a
                // progressToken with every call), the others `notifications/message`.
                let count = args.get("count").and_then(Value::as_u64).unwrap_or(0);
                let token = context.meta.get_progress_token();
                for n in 1..=count {
                    let sent = match &token {
                        Some(token) => {
                            let param = ProgressNotificationParam::new(token.clone(), n as f64)
                                .with_total(count as f64)
                                .with_message(format!("Periodic notification #{n}"));
                            context.peer.notify_progress(param).await
                        }
                        None => {
                            let data = json!(format!("Periodic notification #{n}"));
                            context.peer.notify_logging_message(LoggingMessageNotificationParam::new(LoggingLevel::Info, data)).await
                        }
                    };
                    if sent.is_err() {
                        break;
                    }
                }
                Ok(CallToolResult::success(vec![ContentBlock::text(format!("sent {count}"))]).into())
            }
            other => Err(ErrorData::invalid_params(format!("unknown tool {other}"), None)),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:0".to_owned();
    let mut mode = "stateful".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs a value")?,
            "--mode" => mode = args.next().ok_or("--mode needs a value")?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let mut config = StreamableHttpServerConfig::default();
    config.sse_keep_alive = None;
    let router = match mode.as_str() {
        "stateful" => {
            config.legacy_session_mode = true;
            let service = StreamableHttpService::new(|| Ok(Echo), Arc::new(LocalSessionManager::default()), config);
            axum::Router::new().nest_service("/mcp", service)
        }
        "stateless" => {
            config.legacy_session_mode = false;
            config.json_response = true;
            let service = StreamableHttpService::new(|| Ok(Echo), Arc::new(NeverSessionManager::default()), config);
            axum::Router::new().nest_service("/mcp", service)
        }
        other => return Err(format!("unknown mode {other}").into()),
    };
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    // As every server in the comparison: no Nagle delay on multi-write (SSE) answers.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
