//! The demo server's tools: the catalogue `tools/list` returns and `tools/call` dispatch.
//!
//! Argument problems (unknown tool, wrong type, out of range) are protocol errors (-32602);
//! a tool that runs and fails says so in its result with `isError: true`, as MCP asks.

use core::str::FromStr;
use std::time::Duration;

use forkless_server::{RequestContext, RpcError, SessionHandle};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{DemoHandler, LogLevel, pause, text_result, tool_error};

/// Longest pause a demo tool accepts between two notifications, in milliseconds.
pub const MAX_INTERVAL_MS: u64 = 60_000;
/// Most notifications (or progress steps) one demo tool call may send.
pub const MAX_COUNT: u64 = 10_000;

/// A 1×1 red PNG, base64.
pub(super) const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mP4z8AAAAMBAQD3A0FDAAAAAElFTkSuQmCC";
/// Eight samples of silence as an 8 kHz, 8-bit mono WAV file, base64.
const SILENT_WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// Every tool the demo server offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    // Demo tools, for observing resumption.
    /// `echo`: returns its text.
    Echo,
    /// `start-notification-stream`: numbered notifications on the request's stream.
    StartNotificationStream,
    /// `start-background-stream`: numbered notifications on the standalone stream.
    StartBackgroundStream,
    /// `long-task`: progress `1..steps`.
    LongTask,
    // Conformance fixtures.
    /// Conformance: `test_simple_text`.
    SimpleText,
    /// Conformance: `test_image_content`.
    ImageContent,
    /// Conformance: `test_audio_content`.
    AudioContent,
    /// Conformance: `test_embedded_resource`.
    EmbeddedResource,
    /// Conformance: `test_multiple_content_types`.
    MultipleContentTypes,
    /// Conformance: `test_tool_with_logging`.
    ToolWithLogging,
    /// Conformance: `test_tool_with_progress`.
    ToolWithProgress,
    /// Conformance: `test_error_handling`.
    ErrorHandling,
    /// Conformance: `test_sampling`.
    Sampling,
    /// Conformance: `test_elicitation`.
    Elicitation,
    /// Conformance: the elicitation defaults fixture (SEP-1034).
    ElicitationDefaults,
    /// Conformance: the elicitation enums fixture (SEP-1330).
    ElicitationEnums,
    /// Conformance: `test_reconnection` (SEP-1699 polling).
    Reconnection,
    /// Conformance: the JSON Schema 2020-12 fixture (SEP-1613).
    JsonSchema2020,
}

impl Tool {
    /// Every tool, in the order `tools/list` gives them.
    pub const ALL: [Self; 18] = [
        Self::Echo,
        Self::StartNotificationStream,
        Self::StartBackgroundStream,
        Self::LongTask,
        Self::SimpleText,
        Self::ImageContent,
        Self::AudioContent,
        Self::EmbeddedResource,
        Self::MultipleContentTypes,
        Self::ToolWithLogging,
        Self::ToolWithProgress,
        Self::ErrorHandling,
        Self::Sampling,
        Self::Elicitation,
        Self::ElicitationDefaults,
        Self::ElicitationEnums,
        Self::Reconnection,
        Self::JsonSchema2020,
    ];

    /// The tool's name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Echo => "echo",
            Self::StartNotificationStream => "start-notification-stream",
            Self::StartBackgroundStream => "start-background-stream",
            Self::LongTask => "long-task",
            Self::SimpleText => "test_simple_text",
            Self::ImageContent => "test_image_content",
            Self::AudioContent => "test_audio_content",
            Self::EmbeddedResource => "test_embedded_resource",
            Self::MultipleContentTypes => "test_multiple_content_types",
            Self::ToolWithLogging => "test_tool_with_logging",
            Self::ToolWithProgress => "test_tool_with_progress",
            Self::ErrorHandling => "test_error_handling",
            Self::Sampling => "test_sampling",
            Self::Elicitation => "test_elicitation",
            Self::ElicitationDefaults => "test_elicitation_sep1034_defaults",
            Self::ElicitationEnums => "test_elicitation_sep1330_enums",
            Self::Reconnection => "test_reconnection",
            Self::JsonSchema2020 => "json_schema_2020_12_tool",
        }
    }

    const fn description(self) -> &'static str {
        match self {
            Self::Echo => "Returns the given text unchanged.",
            Self::StartNotificationStream => {
                "Sends `count` info log notifications numbered #1..#N on this request's stream, \
                 `interval` ms apart, then answers."
            }
            Self::StartBackgroundStream => {
                "Answers at once, then sends `count` info log notifications numbered #1..#N on the \
                 session's standalone (GET) stream, `interval` ms apart."
            }
            Self::LongTask => {
                "Runs `steps` steps of `interval` ms, reporting progress after each when the request \
                 carries a progress token."
            }
            Self::SimpleText => "Returns a simple text response.",
            Self::ImageContent => "Returns a 1x1 red PNG image.",
            Self::AudioContent => "Returns a short silent WAV clip.",
            Self::EmbeddedResource => "Returns an embedded text resource.",
            Self::MultipleContentTypes => "Returns text, image and resource content together.",
            Self::ToolWithLogging => "Sends three info log notifications about 50 ms apart while running.",
            Self::ToolWithProgress => "Reports progress 0, 50 and 100 of 100 about 50 ms apart.",
            Self::ErrorHandling => "Always fails, reporting the failure with isError.",
            Self::Sampling => "Asks the client to sample an LLM with the given prompt.",
            Self::Elicitation => "Asks the client for a username and an email address.",
            Self::ElicitationDefaults => "Asks the client for input with defaults for every primitive type.",
            Self::ElicitationEnums => "Asks the client for input with all five enum schema variants.",
            Self::Reconnection => {
                "Closes this request's SSE stream before answering, so the answer arrives only after \
                 the client reconnects with Last-Event-ID."
            }
            Self::JsonSchema2020 => "Tool with JSON Schema 2020-12 features",
        }
    }

    fn input_schema(self) -> Value {
        let interval = json!({
            "type": "number", "minimum": 0, "maximum": MAX_INTERVAL_MS, "default": DEFAULT_INTERVAL_MS,
            "description": "Milliseconds between two notifications."
        });
        let count = json!({
            "type": "integer", "minimum": 0, "maximum": MAX_COUNT, "default": DEFAULT_COUNT,
            "description": "How many notifications to send."
        });
        match self {
            Self::Echo => object_schema(
                json!({ "text": { "type": "string", "description": "The text to return." } }),
                &["text"],
            ),
            Self::StartNotificationStream | Self::StartBackgroundStream => {
                object_schema(json!({ "interval": interval, "count": count }), &[])
            }
            Self::LongTask => object_schema(
                json!({
                    "steps": {
                        "type": "integer", "minimum": 1, "maximum": MAX_COUNT, "default": DEFAULT_STEPS,
                        "description": "How many steps to run."
                    },
                    "interval": {
                        "type": "number", "minimum": 0, "maximum": MAX_INTERVAL_MS,
                        "default": DEFAULT_INTERVAL_MS, "description": "Milliseconds per step."
                    }
                }),
                &[],
            ),
            Self::Sampling => object_schema(
                json!({ "prompt": { "type": "string", "description": "The prompt to send to the LLM." } }),
                &["prompt"],
            ),
            Self::Elicitation => object_schema(
                json!({ "message": { "type": "string", "description": "The message to show the user." } }),
                &["message"],
            ),
            Self::JsonSchema2020 => json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "type": "object",
                        "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
                    }
                },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" }
                },
                "additionalProperties": false
            }),
            Self::SimpleText
            | Self::ImageContent
            | Self::AudioContent
            | Self::EmbeddedResource
            | Self::MultipleContentTypes
            | Self::ToolWithLogging
            | Self::ToolWithProgress
            | Self::ErrorHandling
            | Self::ElicitationDefaults
            | Self::ElicitationEnums
            | Self::Reconnection => object_schema(json!({}), &[]),
        }
    }

    fn describe(self) -> Value {
        json!({ "name": self.name(), "description": self.description(), "inputSchema": self.input_schema() })
    }
}

impl FromStr for Tool {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|t| t.name() == s).ok_or(())
    }
}

fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// The `tools/list` result.
pub(super) fn list() -> Value {
    json!({ "tools": Tool::ALL.map(Tool::describe) })
}

/// `tools/call` params.
#[derive(Debug, Deserialize)]
pub(super) struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

/// Run `tools/call`.
pub(super) async fn call(
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

const DEFAULT_INTERVAL_MS: u64 = 100;
const DEFAULT_COUNT: u64 = 10;
const DEFAULT_STEPS: u64 = 5;

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

/// Send the numbered notifications of `start-background-stream` on the standalone stream.
/// Stops early when the stream refuses (session ended, stream fenced): the refusal is the
/// signal that nobody can receive them any more.
async fn background_stream(handler: DemoHandler, session: SessionHandle, stream: NumberedStream) {
    let key = super::session_key(&session);
    for n in 1..=stream.count {
        if n > 1 {
            tokio::time::sleep(Duration::from_millis(stream.interval)).await;
        }
        if LogLevel::Info < handler.log_level(&key) {
            continue;
        }
        let params = json!({ "level": "info", "logger": super::SERVER_NAME, "data": format!("background notification #{n}") });
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
    match ctx.request("elicitation/create", request).await {
        Ok(reply) => {
            let action = reply["action"].as_str().unwrap_or("unknown");
            let content = reply.get("content").cloned().unwrap_or(Value::Null);
            Ok(text_result(format!("{label}: action={action}, content={content}")))
        }
        Err(e) => Ok(tool_error(format!("elicitation failed: {e}"))),
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
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_unique_name_and_an_object_schema() {
        let mut names: Vec<_> = Tool::ALL.iter().map(|t| t.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Tool::ALL.len());
        for tool in Tool::ALL {
            assert_eq!(tool.name().parse::<Tool>(), Ok(tool));
            let described = tool.describe();
            assert_eq!(described["inputSchema"]["type"], "object", "{}", tool.name());
            assert!(!described["description"].as_str().unwrap_or("").is_empty());
        }
    }

    #[test]
    fn json_schema_2020_keywords_are_kept() {
        let schema = Tool::JsonSchema2020.input_schema();
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert!(schema["$defs"]["address"].is_object());
        assert_eq!(schema["additionalProperties"], false);
    }

    fn args(tool: Tool, arguments: Value) -> ToolArgs {
        ToolArgs { tool, arguments: Some(arguments) }
    }

    fn invalid<T: core::fmt::Debug>(result: Result<T, RpcError>) -> String {
        let err = result.expect_err("should be refused");
        assert_eq!(err.code, -32602, "{}", err.message);
        err.message
    }

    #[test]
    fn echo_needs_a_string_text() {
        invalid(args(Tool::Echo, json!({})).parse::<Echo>().map(|e| e.text));
        invalid(args(Tool::Echo, json!({ "text": 5 })).parse::<Echo>().map(|e| e.text));
        invalid(args(Tool::Echo, json!({ "text": "a", "extra": 1 })).parse::<Echo>().map(|e| e.text));
        invalid(args(Tool::Echo, json!(["text"])).parse::<Echo>().map(|e| e.text));
        let ok = args(Tool::Echo, json!({ "text": "hi" })).parse::<Echo>().expect("valid");
        assert_eq!(ok.text, "hi");
    }

    #[test]
    fn numbered_streams_have_defaults_and_bounds() {
        let defaults = ToolArgs { tool: Tool::StartNotificationStream, arguments: None }
            .parse::<NumberedStream>()
            .and_then(NumberedStream::checked)
            .expect("defaults are valid");
        assert_eq!((defaults.interval, defaults.count), (DEFAULT_INTERVAL_MS, DEFAULT_COUNT));
        let parse = |v| {
            args(Tool::StartNotificationStream, v).parse::<NumberedStream>().and_then(NumberedStream::checked)
        };
        invalid(parse(json!({ "count": -1 })));
        invalid(parse(json!({ "count": "3" })));
        invalid(parse(json!({ "count": 1.5 })));
        invalid(parse(json!({ "count": MAX_COUNT + 1 })));
        invalid(parse(json!({ "interval": MAX_INTERVAL_MS + 1 })));
        invalid(parse(json!({ "interval": u64::MAX })));
        let message = invalid(parse(json!({ "cnt": 3 })));
        assert!(message.contains("start-notification-stream"), "{message}");
        invalid(parse(json!({ "interval": "fast" })));
        invalid(parse(json!({ "interval": -0.5 })));
        assert!(parse(json!({ "count": 0, "interval": 0 })).is_ok());
        let fractional = parse(json!({ "interval": 99.6 })).expect("a fractional interval is fine");
        assert_eq!(fractional.interval, 100);
    }

    #[test]
    fn long_task_needs_at_least_one_step() {
        let parse = |v| args(Tool::LongTask, v).parse::<LongTask>().and_then(LongTask::checked);
        invalid(parse(json!({ "steps": 0 })));
        invalid(parse(json!({ "steps": MAX_COUNT + 1 })));
        invalid(parse(json!({ "interval": -5 })));
        assert!(parse(json!({ "steps": 3, "interval": 10 })).is_ok());
    }

    #[test]
    fn fixture_arguments_are_checked() {
        invalid(args(Tool::Sampling, json!({})).parse::<Sampling>().map(|s| s.prompt));
        invalid(
            args(Tool::Elicitation, json!({ "message": null })).parse::<Elicitation>().map(|e| e.message),
        );
        invalid(args(Tool::JsonSchema2020, json!("x")).object());
    }
}
