//! Unit tests of the demo tools: the catalogue and reading each tool's arguments.

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
    invalid(args(Tool::Elicitation, json!({ "message": null })).parse::<Elicitation>().map(|e| e.message));
    invalid(args(Tool::JsonSchema2020, json!("x")).object());
}
