//! The demo server's prompts (`prompts/list`, `prompts/get`) and argument completion
//! (`completion/complete`) for prompt arguments and resource-template parameters.

use std::collections::HashMap;

use forkless_server::RpcError;
use serde::Deserialize;
use serde_json::{Value, json};

use super::tools::RED_PIXEL_PNG;

/// Most completion values returned at once (MCP caps a response at 100).
const MAX_COMPLETIONS: usize = 100;

/// Every prompt the demo server offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prompt {
    Simple,
    WithArguments,
    WithEmbeddedResource,
    WithImage,
}

impl Prompt {
    const ALL: [Self; 4] = [Self::Simple, Self::WithArguments, Self::WithEmbeddedResource, Self::WithImage];

    const fn name(self) -> &'static str {
        match self {
            Self::Simple => "test_simple_prompt",
            Self::WithArguments => "test_prompt_with_arguments",
            Self::WithEmbeddedResource => "test_prompt_with_embedded_resource",
            Self::WithImage => "test_prompt_with_image",
        }
    }

    /// `(name, description)` of each argument; all are required.
    const fn arguments(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::Simple | Self::WithImage => &[],
            Self::WithArguments => &[("arg1", "First test argument"), ("arg2", "Second test argument")],
            Self::WithEmbeddedResource => &[("resourceUri", "URI of the resource to embed")],
        }
    }

    fn describe(self) -> Value {
        let description = match self {
            Self::Simple => "A simple prompt without arguments",
            Self::WithArguments => "A prompt with two required arguments",
            Self::WithEmbeddedResource => "A prompt that embeds a resource",
            Self::WithImage => "A prompt with image content",
        };
        let arguments: Vec<Value> = self
            .arguments()
            .iter()
            .map(|(name, description)| json!({ "name": name, "description": description, "required": true }))
            .collect();
        json!({ "name": self.name(), "description": description, "arguments": arguments })
    }

    fn messages(self, args: &HashMap<String, String>) -> Value {
        let arg = |name: &str| args.get(name).map_or("", String::as_str);
        match self {
            Self::Simple => {
                json!([user(json!({ "type": "text", "text": "This is a simple prompt for testing." }))])
            }
            Self::WithArguments => json!([user(json!({
                "type": "text",
                "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))
            }))]),
            Self::WithEmbeddedResource => json!([
                user(json!({
                    "type": "resource",
                    "resource": {
                        "uri": arg("resourceUri"),
                        "mimeType": "text/plain",
                        "text": "Embedded resource content for testing."
                    }
                })),
                user(json!({ "type": "text", "text": "Please process the embedded resource above." }))
            ]),
            Self::WithImage => json!([
                user(json!({ "type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png" })),
                user(json!({ "type": "text", "text": "Please analyze the image above." }))
            ]),
        }
    }
}

fn user(content: Value) -> Value {
    json!({ "role": "user", "content": content })
}

/// The `prompts/list` result.
pub(super) fn list() -> Value {
    json!({ "prompts": Prompt::ALL.map(Prompt::describe) })
}

/// `prompts/get` params.
#[derive(Debug, Deserialize)]
pub(super) struct GetParams {
    name: String,
    #[serde(default)]
    arguments: Option<HashMap<String, String>>,
}

/// Run `prompts/get`: unknown prompts and missing required arguments are invalid params.
pub(super) fn get(params: GetParams) -> Result<Value, RpcError> {
    let prompt = Prompt::ALL
        .into_iter()
        .find(|p| p.name() == params.name)
        .ok_or_else(|| RpcError::invalid_params(format!("unknown prompt `{}`", params.name)))?;
    let args = params.arguments.unwrap_or_default();
    let missing: Vec<&str> =
        prompt.arguments().iter().map(|(name, _)| *name).filter(|name| !args.contains_key(*name)).collect();
    if !missing.is_empty() {
        return Err(RpcError::invalid_params(format!(
            "prompt `{}` is missing required arguments: {}",
            prompt.name(),
            missing.join(", ")
        )));
    }
    Ok(json!({ "description": prompt.describe()["description"], "messages": prompt.messages(&args) }))
}

/// `completion/complete` params.
#[derive(Debug, Deserialize)]
pub(super) struct CompleteParams {
    #[serde(rename = "ref")]
    reference: Reference,
    argument: Argument,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Reference {
    #[serde(rename = "ref/prompt")]
    Prompt { name: String },
    #[serde(rename = "ref/resource")]
    Resource { uri: String },
}

#[derive(Debug, Deserialize)]
struct Argument {
    name: String,
    value: String,
}

/// Run `completion/complete`: candidates that start with the typed value. Arguments without
/// suggestions complete to an empty list, which MCP allows.
pub(super) fn complete(params: CompleteParams) -> Result<Value, RpcError> {
    let candidates: &[&str] = match &params.reference {
        Reference::Prompt { name } => {
            let prompt = Prompt::ALL
                .into_iter()
                .find(|p| p.name() == name)
                .ok_or_else(|| RpcError::invalid_params(format!("unknown prompt `{name}`")))?;
            match (prompt, params.argument.name.as_str()) {
                (Prompt::WithArguments, "arg1") => &["paris", "park", "party", "test", "testValue1"],
                (Prompt::WithArguments, "arg2") => &["test", "testValue2", "world"],
                (Prompt::WithEmbeddedResource, "resourceUri") => {
                    &["test://example-resource", "test://static-text", "test://watched-resource"]
                }
                _ => &[],
            }
        }
        Reference::Resource { uri } => match (uri.as_str(), params.argument.name.as_str()) {
            ("test://template/{id}/data", "id") => &["1", "123", "42"],
            _ => &[],
        },
    };
    let typed = params.argument.value.as_str();
    let matches: Vec<&str> = candidates.iter().copied().filter(|c| c.starts_with(typed)).collect();
    let shown = &matches[..matches.len().min(MAX_COMPLETIONS)];
    Ok(json!({
        "completion": { "values": shown, "total": matches.len(), "hasMore": matches.len() > shown.len() }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get_named(name: &str, arguments: Value) -> Result<Value, RpcError> {
        get(serde_json::from_value(json!({ "name": name, "arguments": arguments })).expect("params"))
    }

    #[test]
    fn arguments_are_substituted() {
        let result = get_named("test_prompt_with_arguments", json!({ "arg1": "hello", "arg2": "world" }))
            .expect("prompt");
        assert_eq!(
            result["messages"][0]["content"]["text"],
            "Prompt with arguments: arg1='hello', arg2='world'"
        );
    }

    #[test]
    fn missing_arguments_and_unknown_prompts_are_invalid_params() {
        let err = get_named("test_prompt_with_arguments", json!({ "arg1": "x" })).expect_err("arg2 missing");
        assert_eq!(err.code, -32602);
        assert!(err.message.contains("arg2"), "{}", err.message);
        assert_eq!(get_named("nope", json!({})).expect_err("unknown").code, -32602);
    }

    #[test]
    fn every_listed_prompt_renders() {
        for prompt in Prompt::ALL {
            let args: Value = prompt.arguments().iter().map(|(n, _)| (n.to_string(), json!("v"))).collect();
            let messages = get_named(prompt.name(), args).map(|r| r["messages"].as_array().map(Vec::len));
            assert!(matches!(messages, Ok(Some(n)) if n > 0), "{}: {messages:?}", prompt.name());
        }
    }

    #[test]
    fn completion_filters_by_prefix() {
        let params = |v: Value| serde_json::from_value::<CompleteParams>(v).expect("params");
        let result = complete(params(json!({
            "ref": { "type": "ref/prompt", "name": "test_prompt_with_arguments" },
            "argument": { "name": "arg1", "value": "par" }
        })))
        .expect("completion");
        assert_eq!(result["completion"]["values"], json!(["paris", "park", "party"]));
        let resource = complete(params(json!({
            "ref": { "type": "ref/resource", "uri": "test://template/{id}/data" },
            "argument": { "name": "id", "value": "" }
        })))
        .expect("completion");
        assert_eq!(resource["completion"]["total"], 3);
        assert!(serde_json::from_value::<CompleteParams>(json!({ "ref": { "type": "ref/x" } })).is_err());
    }
}
