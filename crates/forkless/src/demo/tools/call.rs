//! `tools/call`: each demo tool's behaviour, and reading its arguments.
//!
//! The catalogue (names, descriptions, schemas) is [`super`]'s; this module runs a call.

use std::time::Duration;

use forkless_server::input::AskError;
use forkless_server::{RequestContext, RpcError, SessionHandle};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::super::{DemoHandler, LogLevel, pause, text_result, tool_error};
use super::{
    DEFAULT_COUNT, DEFAULT_INTERVAL_MS, DEFAULT_STEPS, MAX_COUNT, MAX_INTERVAL_MS, RED_PIXEL_PNG, SILENT_WAV,
    Tool,
};

/// `tools/call` params.
#[derive(Debug, Deserialize)]
pub(in crate::demo) struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

/// Run `tools/call`.
pub(in crate::demo) async fn call(
    handler: &DemoHandler,
    params: CallParams,
    ctx: &RequestContext,
) -> Result<Value, RpcError> {
    let tool = params
        .name
        .parse::<Tool>()
        .map_err(|()| RpcError::invalid_params(format!("unknown tool `{}`", params.name)))?;
    let args = ToolArgs { tool, arguments: params.arguments };
    match tool {
        Tool::Echo => {
            let Echo { text } = args.parse()?;
            Ok(text_result(text))
        }
        Tool::StartNotificationStream => {
            let stream = args.parse::<NumberedStream>()?.checked()?;
            for n in 1..=stream.count {
                if n > 1 {
                    pause(ctx, stream.interval).await?;
                }
                handler.log(ctx, LogLevel::Info, json!(format!("notification #{n}"))).await?;
            }
            Ok(text_result(format!("sent {} notifications", stream.count)))
        }
        Tool::StartBackgroundStream => {
            let stream = args.parse::<NumberedStream>()?.checked()?;
            tokio::spawn(background_stream(handler.clone(), ctx.session().clone(), stream));
            Ok(text_result(format!(
                "sending {} notifications on the standalone stream, {} ms apart",
                stream.count, stream.interval
            )))
        }
        Tool::LongTask => {
            let task = args.parse::<LongTask>()?.checked()?;
            let reports = ctx.progress_token().is_some();
            for step in 1..=task.steps {
                pause(ctx, task.interval).await?;
                if reports {
                    let message = format!("step {step} of {}", task.steps);
                    #[allow(clippy::cast_precision_loss)] // both are at most MAX_COUNT
                    ctx.progress(step as f64, Some(task.steps as f64), Some(&message))
                        .await
                        .map_err(|e| RpcError::internal(format!("cannot send progress: {e}")))?;
                }
            }
            Ok(text_result(format!("long task finished after {} steps", task.steps)))
        }
        Tool::SimpleText => Ok(text_result("This is a simple text response for testing.")),
        Tool::ImageContent => Ok(json!({ "content": [image_content()] })),
        Tool::AudioContent => {
            Ok(json!({ "content": [{ "type": "audio", "data": SILENT_WAV, "mimeType": "audio/wav" }] }))
        }
        Tool::EmbeddedResource => Ok(json!({
            "content": [{
                "type": "resource",
                "resource": {
                    "uri": "test://embedded-resource",
                    "mimeType": "text/plain",
                    "text": "This is an embedded resource content."
                }
            }]
        })),
        Tool::MultipleContentTypes => Ok(json!({
            "content": [
                { "type": "text", "text": "Multiple content types test:" },
                image_content(),
                {
                    "type": "resource",
                    "resource": {
                        "uri": "test://mixed-content-resource",
                        "mimeType": "application/json",
                        "text": json!({ "test": "data", "value": 123 }).to_string()
                    }
                }
            ]
        })),
        Tool::ToolWithLogging => {
            handler.log(ctx, LogLevel::Info, json!("Tool execution started")).await?;
            pause(ctx, 50).await?;
            handler.log(ctx, LogLevel::Info, json!("Tool processing data")).await?;
            pause(ctx, 50).await?;
            handler.log(ctx, LogLevel::Info, json!("Tool execution completed")).await?;
            Ok(text_result("Tool with logging executed successfully"))
        }
        Tool::LoggingTool => {
            for message in ["logging tool started", "logging tool working", "logging tool done"] {
                handler.log(ctx, LogLevel::Info, json!(message)).await?;
            }
            Ok(text_result("logged three messages"))
        }
        Tool::MissingCapability => {
            if !client_declared(ctx.session(), "sampling") {
                return Err(RpcError::new(
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "missing required client capability: sampling",
                )
                .with_data(json!({ "requiredCapabilities": { "sampling": {} } })));
            }
            Ok(text_result("the client declared sampling"))
        }
        Tool::HeaderParam => {
            let region = args.arguments.as_ref().and_then(|a| a.get("region")).and_then(Value::as_str);
            let region =
                region.ok_or_else(|| RpcError::invalid_params("test_header_param needs a string region"))?;
            Ok(text_result(format!("region: {region}")))
        }
        Tool::StreamingElicitation => {
            let schema = json!({ "type": "object", "properties": { "answer": { "type": "string" } } });
            elicit(ctx, "Anything to add?", schema, "Answer").await
        }
        Tool::ToolWithProgress => {
            let reports = ctx.progress_token().is_some();
            for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    pause(ctx, 50).await?;
                }
                if reports {
                    ctx.progress(progress, Some(100.0), None)
                        .await
                        .map_err(|e| RpcError::internal(format!("cannot send progress: {e}")))?;
                }
            }
            Ok(text_result("Tool with progress executed successfully"))
        }
        Tool::ErrorHandling => Ok(tool_error("This tool intentionally returns an error for testing")),
        Tool::Sampling => {
            let Sampling { prompt } = args.parse()?;
            if !client_declared(ctx.session(), "sampling") {
                return Ok(tool_error("the client does not support sampling"));
            }
            let request = json!({
                "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
                "maxTokens": 100
            });
            match ctx.request("sampling/createMessage", request).await {
                Ok(reply) => {
                    let content = &reply["content"];
                    let text = content["text"].as_str().map_or_else(|| content.to_string(), str::to_owned);
                    Ok(text_result(format!("LLM response: {text}")))
                }
                Err(e) => Ok(tool_error(format!("sampling failed: {e}"))),
            }
        }
        Tool::Elicitation => {
            let Elicitation { message } = args.parse()?;
            let schema = json!({
                "type": "object",
                "properties": {
                    "username": { "type": "string", "description": "User's response" },
                    "email": { "type": "string", "description": "User's email address" }
                },
                "required": ["username", "email"]
            });
            elicit(ctx, &message, schema, "User response").await
        }
        Tool::ElicitationDefaults => {
            let schema = json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "User name", "default": "John Doe" },
                    "age": { "type": "integer", "description": "User age", "default": 30 },
                    "score": { "type": "number", "description": "User score", "default": 95.5 },
                    "status": {
                        "type": "string",
                        "description": "User status",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active"
                    },
                    "verified": { "type": "boolean", "description": "Verification status", "default": true }
                },
                "required": []
            });
            elicit(
                ctx,
                "Please review and update the form fields with defaults",
                schema,
                "Elicitation completed",
            )
            .await
        }
        Tool::ElicitationEnums => {
            let schema = json!({
                "type": "object",
                "properties": {
                    "untitledSingle": {
                        "type": "string",
                        "description": "Untitled single-select",
                        "enum": ["option1", "option2", "option3"]
                    },
                    "titledSingle": {
                        "type": "string",
                        "description": "Titled single-select",
                        "oneOf": [
                            { "const": "value1", "title": "First Option" },
                            { "const": "value2", "title": "Second Option" },
                            { "const": "value3", "title": "Third Option" }
                        ]
                    },
                    "legacyEnum": {
                        "type": "string",
                        "description": "Legacy titled enum",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"]
                    },
                    "untitledMulti": {
                        "type": "array",
                        "description": "Untitled multi-select",
                        "items": { "type": "string", "enum": ["option1", "option2", "option3"] }
                    },
                    "titledMulti": {
                        "type": "array",
                        "description": "Titled multi-select",
                        "items": {
                            "anyOf": [
                                { "const": "value1", "title": "First Choice" },
                                { "const": "value2", "title": "Second Choice" },
                                { "const": "value3", "title": "Third Choice" }
                            ]
                        }
                    }
                }
            });
            elicit(ctx, "Please choose from the enum fields", schema, "Elicitation completed").await
        }
        Tool::Reconnection => reconnection(handler, ctx).await,
        Tool::JsonSchema2020 => {
            let arguments = args.object()?;
            Ok(text_result(format!("Received: {}", Value::Object(arguments))))
        }
    }
}

/// The `arguments` of one call, with the tool they are for (named in error messages).
struct ToolArgs {
    tool: Tool,
    arguments: Option<Value>,
}

impl ToolArgs {
    /// The arguments as an object; absent or `null` is `{}`.
    fn object(self) -> Result<serde_json::Map<String, Value>, RpcError> {
        match self.arguments {
            None | Some(Value::Null) => Ok(serde_json::Map::new()),
            Some(Value::Object(map)) => Ok(map),
            Some(_) => Err(RpcError::invalid_params(format!(
                "arguments of `{}` must be an object",
                self.tool.name()
            ))),
        }
    }

    fn parse<T: DeserializeOwned>(self) -> Result<T, RpcError> {
        let tool = self.tool;
        let map = self.object()?;
        serde_json::from_value(Value::Object(map))
            .map_err(|e| RpcError::invalid_params(format!("invalid arguments for `{}`: {e}", tool.name())))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Echo {
    text: String,
}

/// Arguments of the two numbered-stream tools.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NumberedStream {
    #[serde(default = "default_interval", deserialize_with = "millis")]
    interval: u64,
    #[serde(default = "default_count")]
    count: u64,
}

impl NumberedStream {
    fn checked(self) -> Result<Self, RpcError> {
        at_most("count", self.count, MAX_COUNT)?;
        Ok(self)
    }
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LongTask {
    #[serde(default = "default_steps")]
    steps: u64,
    #[serde(default = "default_interval", deserialize_with = "millis")]
    interval: u64,
}

impl LongTask {
    fn checked(self) -> Result<Self, RpcError> {
        if self.steps == 0 {
            return Err(RpcError::invalid_params("`steps` must be at least 1"));
        }
        at_most("steps", self.steps, MAX_COUNT)?;
        Ok(self)
    }
}

#[derive(Deserialize)]
struct Sampling {
    prompt: String,
}

#[derive(Deserialize)]
struct Elicitation {
    message: String,
}

const fn default_interval() -> u64 {
    DEFAULT_INTERVAL_MS
}
const fn default_count() -> u64 {
    DEFAULT_COUNT
}
const fn default_steps() -> u64 {
    DEFAULT_STEPS
}

/// An `interval` in milliseconds: any JSON number from 0 to [`MAX_INTERVAL_MS`], fractions
/// rounded to the nearest millisecond (clients in loosely typed languages send `100.0`).
fn millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[allow(clippy::cast_precision_loss)] // MAX_INTERVAL_MS is far below 2^52
    const MAX: f64 = MAX_INTERVAL_MS as f64;
    let ms = f64::deserialize(d)?;
    if !(0.0..=MAX).contains(&ms) {
        return Err(serde::de::Error::custom(format!(
            "`interval` must be a number of milliseconds from 0 to {MAX_INTERVAL_MS}, got {ms}"
        )));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // checked just above
    Ok(ms.round() as u64)
}

fn at_most(name: &str, value: u64, max: u64) -> Result<(), RpcError> {
    if value > max {
        return Err(RpcError::invalid_params(format!("`{name}` must be at most {max}, got {value}")));
    }
    Ok(())
}

fn image_content() -> Value {
    json!({ "type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png" })
}

fn client_declared(session: &SessionHandle, capability: &str) -> bool {
    session.client_capabilities().get(capability).is_some_and(|c| !c.is_null())
}

/// JSON-RPC (2026-07-28): the request needs a client capability it did not declare.
const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;

/// Send the numbered notifications of `start-background-stream` on the standalone stream.
/// Stops early when the stream refuses (session ended, stream fenced): the refusal is the
/// signal that nobody can receive them any more.
async fn background_stream(handler: DemoHandler, session: SessionHandle, stream: NumberedStream) {
    let key = super::super::session_key(&session);
    for n in 1..=stream.count {
        if n > 1 {
            tokio::time::sleep(Duration::from_millis(stream.interval)).await;
        }
        if LogLevel::Info < handler.log_level(&key) {
            continue;
        }
        let params = json!({ "level": "info", "logger": super::super::SERVER_NAME, "data": format!("background notification #{n}") });
        if let Err(e) = session.notify("notifications/message", params).await {
            tracing::debug!(session = %key, sent = n - 1, "background stream stopped: {e}");
            return;
        }
    }
}

/// Ask the client for input and report its answer as `<label>: action=…, content=…`.
async fn elicit(ctx: &RequestContext, message: &str, schema: Value, label: &str) -> Result<Value, RpcError> {
    if !client_declared(ctx.session(), "elicitation") {
        return Ok(tool_error("the client does not support elicitation"));
    }
    let request = json!({ "message": message, "requestedSchema": schema });
    // One call whatever the revision: a request on the stream (sessions), or an
    // InputRequiredResult and the answer on the retry (2026-07-28).
    match ctx.elicit("response", request).await {
        Ok(reply) => {
            let action = reply["action"].as_str().unwrap_or("unknown");
            let content = reply.get("content").cloned().unwrap_or(Value::Null);
            Ok(text_result(format!("{label}: action={action}, content={content}")))
        }
        Err(AskError::Failed(e)) => Ok(tool_error(format!("elicitation failed: {e}"))),
        Err(unanswered) => Err(unanswered.into()),
    }
}

/// `test_reconnection`: answer only after the server has closed this request's SSE
/// connection, so the answer can only be read by resuming with `Last-Event-ID` (SEP-1699
/// polling). The handler API has no way to close the connection itself, so the tool waits out
/// the server's poll window (`--poll-after`); without one it answers on the open stream.
async fn reconnection(handler: &DemoHandler, ctx: &RequestContext) -> Result<Value, RpcError> {
    let wait = handler.poll_after.map_or(RECONNECTION_MIN_WAIT, |poll| poll + RECONNECTION_MIN_WAIT * 2);
    pause(ctx, u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)).await?;
    Ok(text_result("Reconnection test completed successfully"))
}

/// Shortest wait of `test_reconnection`, and half its margin past the poll window.
const RECONNECTION_MIN_WAIT: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests;
