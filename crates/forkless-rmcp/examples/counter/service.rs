//! An ordinary rmcp server: a counter, an echo, two tools that report progress and one that
//! logs in the background. Nothing
//! here knows about forkless; `main.rs` is the only place that does.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};

/// The counter is shared by every session of the process: a session's instance holds none of
/// it, so a session could be restored on a new instance.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counter {
    value: Arc<AtomicI64>,
}

/// `echo`'s input.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct Echo {
    /// What to send back.
    pub(crate) text: String,
}

/// `long-task`'s input.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct Steps {
    /// How many steps (progress 1..steps).
    pub(crate) steps: u64,
    /// Milliseconds between steps.
    #[serde(default)]
    pub(crate) interval: u64,
}

/// `start-notification-stream`'s input.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct Stream {
    /// How many notifications (progress 1..count, each message ending in `#n`).
    pub(crate) count: u64,
    /// Milliseconds between them.
    #[serde(default)]
    pub(crate) interval: u64,
}

impl Counter {
    /// A counter at zero.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Progress `1..=n` `interval` ms apart, if the call asked for progress.
    async fn progress(
        ctx: &RequestContext<RoleServer>,
        n: u64,
        interval: u64,
        numbered: bool,
    ) -> Result<(), ErrorData> {
        let Some(token) = ctx.meta.get_progress_token() else { return Ok(()) };
        for i in 1..=n {
            let mut param = ProgressNotificationParam::new(token.clone(), i as f64).with_total(n as f64);
            if numbered {
                param = param.with_message(format!("Periodic notification #{i}"));
            }
            ctx.peer
                .notify_progress(param)
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            if interval > 0 {
                tokio::time::sleep(Duration::from_millis(interval)).await;
            }
        }
        Ok(())
    }
}

#[tool_router]
impl Counter {
    #[tool(description = "Add one to the counter and answer its new value")]
    async fn increment(&self) -> Result<CallToolResult, ErrorData> {
        let value = self.value.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(CallToolResult::success(vec![ContentBlock::text(value.to_string())]))
    }

    #[tool(description = "The counter's value")]
    async fn get_value(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(self.value.load(Ordering::SeqCst).to_string())]))
    }

    #[tool(description = "Send the text back")]
    async fn echo(&self, Parameters(Echo { text }): Parameters<Echo>) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    #[tool(name = "long-task", description = "Report progress for each step, then answer")]
    async fn long_task(
        &self,
        Parameters(Steps { steps, interval }): Parameters<Steps>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Self::progress(&ctx, steps, interval, false).await?;
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("done after {steps} steps"))]))
    }

    #[tool(
        name = "start-background-stream",
        description = "Answer at once, then send numbered log messages that belong to no request"
    )]
    async fn start_background_stream(
        &self,
        Parameters(Stream { count, interval }): Parameters<Stream>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let peer = ctx.peer.clone();
        tokio::spawn(async move {
            for i in 1..=count {
                let data = serde_json::json!(format!("Background notification #{i}"));
                // rmcp marks its logging API deprecated (SEP-2577); it is what clients read today.
                #[allow(deprecated)]
                let sent = peer
                    .notify_logging_message(LoggingMessageNotificationParam::new(LoggingLevel::Info, data))
                    .await;
                if sent.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(interval)).await;
            }
        });
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("sending {count}"))]))
    }

    #[tool(name = "start-notification-stream", description = "Numbered progress notifications, then answer")]
    async fn start_notification_stream(
        &self,
        Parameters(Stream { count, interval }): Parameters<Stream>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Self::progress(&ctx, count, interval, true).await?;
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("sent {count}"))]))
    }
}

#[tool_handler(router = Self::tool_router())]
impl ServerHandler for Counter {
    // Logging is what `start-background-stream` sends; rmcp marks it deprecated (SEP-2577).
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
    }
}
