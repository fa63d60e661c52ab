//! The demo server's tools: the catalogue `tools/list` returns and `tools/call` dispatch.
//!
//! Argument problems (unknown tool, wrong type, out of range) are protocol errors (-32602);
//! a tool that runs and fails says so in its result with `isError: true`, as MCP asks.

use core::str::FromStr;

use serde_json::{Value, json};

/// Longest pause a demo tool accepts between two notifications, in milliseconds.
pub const MAX_INTERVAL_MS: u64 = 60_000;
/// Most notifications (or progress steps) one demo tool call may send.
pub const MAX_COUNT: u64 = 10_000;
const DEFAULT_INTERVAL_MS: u64 = 100;
const DEFAULT_COUNT: u64 = 10;
const DEFAULT_STEPS: u64 = 5;

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
    /// Conformance (2026-07-28): logs, so a request without the `logLevel` opt-in sees none.
    LoggingTool,
    /// Conformance (2026-07-28): needs the client's `sampling` capability (`-32021` without).
    MissingCapability,
    /// Conformance (2026-07-28): a `region` argument mirrored into `Mcp-Param-Region`.
    HeaderParam,
    /// Conformance (2026-07-28): would elicit on its response stream, which that revision
    /// forbids, so it answers with a tool error there.
    StreamingElicitation,
}

impl Tool {
    /// Every tool, in the order `tools/list` gives them.
    // A tool without arguments first: probes that call the first listed tool with `{}`
    // (the 2026-07-28 conformance suite's header checks) then exercise a call that succeeds.
    pub const ALL: [Self; 22] = [
        Self::SimpleText,
        Self::Echo,
        Self::StartNotificationStream,
        Self::StartBackgroundStream,
        Self::LongTask,
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
        Self::LoggingTool,
        Self::MissingCapability,
        Self::StreamingElicitation,
        Self::HeaderParam,
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
            Self::LoggingTool => "test_logging_tool",
            Self::MissingCapability => "test_missing_capability",
            Self::StreamingElicitation => "test_streaming_elicitation",
            Self::HeaderParam => "test_header_param",
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
            Self::LoggingTool => "Logs three info messages (sent only where the request opts in to logs).",
            Self::MissingCapability => {
                "Needs the client's sampling capability; refused with -32021 without it."
            }
            Self::StreamingElicitation => {
                "Elicits on its response stream in the session revisions; a tool error in 2026-07-28."
            }
            Self::HeaderParam => "Echoes its region, which 2026-07-28 clients mirror into Mcp-Param-Region.",
            Self::ElicitationDefaults => "Asks the client for input with defaults for every primitive type.",
            Self::ElicitationEnums => "Asks the client for input with all five enum schema variants.",
            Self::Reconnection => {
                "Closes this request's SSE stream before answering, so the answer arrives only after \
                 the client reconnects with Last-Event-ID."
            }
            Self::JsonSchema2020 => "Tool with JSON Schema 2020-12 features",
        }
    }

    pub(super) fn input_schema(self) -> Value {
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
            // 2020-12 keywords a server must pass on untouched (SEP-1613, SEP-2106): `$defs`
            // with an `$anchor`, composition (`allOf` around `anyOf`) and conditionals.
            Self::JsonSchema2020 => json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "postalAddress",
                        "type": "object",
                        "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
                    }
                },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" },
                    "reach": { "type": "string", "enum": ["email", "phone"] },
                    "email": { "type": "string" },
                    "phone": { "type": "string" }
                },
                "allOf": [{ "anyOf": [{ "required": ["email"] }, { "required": ["phone"] }] }],
                "if": { "properties": { "reach": { "const": "email" } }, "required": ["reach"] },
                "then": { "required": ["email"] },
                "else": { "required": ["phone"] },
                "additionalProperties": false
            }),
            Self::HeaderParam => object_schema(
                json!({ "region": { "type": "string", "description": "A region name.", "x-mcp-header": "Region" } }),
                &["region"],
            ),
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
            | Self::Reconnection
            | Self::LoggingTool
            | Self::MissingCapability
            | Self::StreamingElicitation => object_schema(json!({}), &[]),
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

mod call;
pub(super) use call::call;
