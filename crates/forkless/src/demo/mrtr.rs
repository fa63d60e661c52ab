//! Multi-round-trip requests (MCP 2026-07-28, SEP-2322): the conformance fixtures that
//! answer `tools/call` or `prompts/get` with an `InputRequiredResult` (`resultType:
//! "input_required"`, the `inputRequests` the client must answer, and an opaque
//! `requestState`), and finish when the client calls again with `inputResponses` (and the
//! state echoed).
//!
//! The handler keeps nothing between rounds: what a later round needs travels in
//! `requestState`, which the server seals (`RequestContext::input_required`) and checks
//! before the next round reaches this code (`RequestContext::request_state`): a tampered,
//! expired, replayed or another principal's state never gets here. A missing answer is asked
//! for again, never guessed.
//!
//! It owns these fixtures' rounds, not the sealing (`forkless_server::request_state`), the
//! catalogue's other tools ([`super::tools`]) nor the wire (`resultType` is the server's).

use forkless_server::{RequestContext, RpcError};
use serde_json::{Map, Value, json};

/// The prompt that needs an elicitation first.
pub(super) const PROMPT: &str = "test_input_required_result_prompt";

/// The fixture tools, by what they ask the client for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InputTool {
    /// One elicitation (`user_name`).
    Elicitation,
    /// One sampling request (`capital_question`).
    Sampling,
    /// One `roots/list` (`client_roots`).
    ListRoots,
    /// One elicitation (`confirm`) and a sealed `requestState` that must come back.
    RequestState,
    /// An elicitation, a sampling request and a `roots/list` at once, with state.
    MultipleInputs,
    /// Two rounds of elicitation, the state carrying the first answer into the second.
    MultiRound,
    /// Like `RequestState`; a tampered state must be refused.
    TamperedState,
    /// Only what the request's `_meta` client capabilities declare.
    Capabilities,
}

impl InputTool {
    /// Every fixture, in the order `tools/list` gives them.
    pub(super) const ALL: [Self; 8] = [
        Self::Elicitation,
        Self::Sampling,
        Self::ListRoots,
        Self::RequestState,
        Self::MultipleInputs,
        Self::MultiRound,
        Self::TamperedState,
        Self::Capabilities,
    ];

    /// The tool's name on the wire.
    pub(super) const fn name(self) -> &'static str {
        match self {
            Self::Elicitation => "test_input_required_result_elicitation",
            Self::Sampling => "test_input_required_result_sampling",
            Self::ListRoots => "test_input_required_result_list_roots",
            Self::RequestState => "test_input_required_result_request_state",
            Self::MultipleInputs => "test_input_required_result_multiple_inputs",
            Self::MultiRound => "test_input_required_result_multi_round",
            Self::TamperedState => "test_input_required_result_tampered_state",
            Self::Capabilities => "test_input_required_result_capabilities",
        }
    }

    /// The fixture named `name`, if it is one.
    pub(super) fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Its `tools/list` entry.
    pub(super) fn entry(self) -> Value {
        json!({
            "name": self.name(),
            "description": "Conformance (2026-07-28, SEP-2322): answers with an InputRequiredResult first",
            "inputSchema": { "type": "object", "properties": {} },
        })
    }
}

/// The round a call is in: its answers so far and its (opened) state.
struct Round<'a> {
    responses: Option<&'a Map<String, Value>>,
    state: Option<Value>,
}

impl<'a> Round<'a> {
    fn of(params: &'a Value, ctx: &RequestContext) -> Self {
        let responses = params.get("inputResponses").and_then(Value::as_object);
        Self { responses, state: ctx.request_state().cloned() }
    }

    fn answer(&self, key: &str) -> Option<&'a Value> {
        self.responses.and_then(|r| r.get(key))
    }

    /// Whether the state says this is `step` of `tool`.
    fn at(&self, tool: &str, step: u64) -> bool {
        self.state.as_ref().is_some_and(|s| s["tool"] == tool && s["step"] == step)
    }
}

pub(super) fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": { "type": "object", "properties": { field: { "type": kind } }, "required": [field] },
        },
    })
}

fn sample(question: &str, max_tokens: u64) -> Value {
    json!({
        "method": "sampling/createMessage",
        "params": {
            "messages": [{ "role": "user", "content": { "type": "text", "text": question } }],
            "maxTokens": max_tokens,
        },
    })
}

fn list_roots() -> Value {
    json!({ "method": "roots/list", "params": {} })
}

fn text(s: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": s.into() }] })
}

/// An accepted elicitation's `field`, or `None`.
pub(super) fn elicited<'v>(answer: &'v Value, field: &str) -> Option<&'v str> {
    (answer["action"] == "accept").then(|| answer["content"][field].as_str()).flatten()
}

/// The text a sampling answer carries.
fn sampled(answer: &Value) -> String {
    answer["content"]["text"].as_str().unwrap_or_default().to_owned()
}

/// The URIs a `roots/list` answer names.
fn root_uris(answer: &Value) -> Vec<String> {
    let roots = answer["roots"].as_array().map(Vec::as_slice).unwrap_or_default();
    roots.iter().filter_map(|r| r["uri"].as_str().map(str::to_owned)).collect()
}

/// The name a call of `tool` gathered in an earlier round (its `user_name` elicitation,
/// answered with the state the server sealed for it), or the `InputRequiredResult` that asks.
pub(super) fn name_first(tool: &str, params: &Value, ctx: &RequestContext) -> Result<String, Value> {
    let round = Round::of(params, ctx);
    if let (Some(who), true) =
        (round.answer("user_name").and_then(|a| elicited(a, "name")), round.at(tool, 1))
    {
        return Ok(who.to_owned());
    }
    let ask = json!({ "user_name": elicit("What is your name?", "name", "string") });
    Err(ctx.input_required(ask, Some(&json!({ "tool": tool, "step": 1 }))))
}

/// Run `tool` on `params` (the whole `tools/call` params); `capabilities` are the request's
/// declared client capabilities.
pub(super) fn call(tool: InputTool, params: &Value, ctx: &RequestContext) -> Result<Value, RpcError> {
    let round = Round::of(params, ctx);
    let capabilities = ctx.session().client_capabilities();
    let name = tool.name();
    let sealed = |step: u64, extra: Value| {
        let mut state = json!({ "tool": name, "step": step });
        if let (Some(state), Value::Object(extra)) = (state.as_object_mut(), extra) {
            state.extend(extra);
        }
        Some(state)
    };
    let input_required = |requests: Value, state: Option<Value>| ctx.input_required(requests, state.as_ref());
    Ok(match tool {
        InputTool::Elicitation => match round.answer("user_name").and_then(|a| elicited(a, "name")) {
            Some(who) => text(format!("Hello, {who}!")),
            None => {
                input_required(json!({ "user_name": elicit("What is your name?", "name", "string") }), None)
            }
        },
        InputTool::Sampling => match round.answer("capital_question") {
            Some(answer) => text(format!("The model answered: {}", sampled(answer))),
            None => input_required(
                json!({ "capital_question": sample("What is the capital of France?", 100) }),
                None,
            ),
        },
        InputTool::ListRoots => match round.answer("client_roots") {
            Some(answer) => text(format!("The client's roots: {}", root_uris(answer).join(", "))),
            None => input_required(json!({ "client_roots": list_roots() }), None),
        },
        InputTool::RequestState | InputTool::TamperedState => {
            match (round.answer("confirm"), round.at(name, 1)) {
                (Some(answer), true) => text(format!("state-ok: confirmed {}", answer["content"]["ok"])),
                (Some(_), false) => return Err(RpcError::invalid_params("requestState is missing")),
                (None, _) => input_required(
                    json!({ "confirm": elicit("Please confirm", "ok", "boolean") }),
                    sealed(1, json!({})),
                ),
            }
        }
        InputTool::MultipleInputs => {
            let answers = (round.answer("user_name"), round.answer("greeting"), round.answer("client_roots"));
            match (answers, round.at(name, 1)) {
                ((Some(who), Some(greeting), Some(roots)), true) => text(format!(
                    "{}, {}: {} root(s)",
                    sampled(greeting),
                    elicited(who, "name").unwrap_or("stranger"),
                    root_uris(roots).len()
                )),
                _ => input_required(
                    json!({
                        "user_name": elicit("What is your name?", "name", "string"),
                        "greeting": sample("Generate a greeting", 50),
                        "client_roots": list_roots(),
                    }),
                    sealed(1, json!({})),
                ),
            }
        }
        InputTool::MultiRound => {
            let first = || {
                input_required(
                    json!({ "step1": elicit("Step 1: What is your name?", "name", "string") }),
                    sealed(1, json!({})),
                )
            };
            if let (Some(color), true) =
                (round.answer("step2").and_then(|a| elicited(a, "color")), round.at(name, 2))
            {
                let who = round.state.as_ref().and_then(|s| s["name"].as_str()).unwrap_or("stranger");
                text(format!("{who} likes {color}"))
            } else if let (Some(who), true) =
                (round.answer("step1").and_then(|a| elicited(a, "name")), round.at(name, 1))
            {
                input_required(
                    json!({ "step2": elicit("Step 2: What is your favorite color?", "color", "string") }),
                    sealed(2, json!({ "name": who })),
                )
            } else {
                first()
            }
        }
        InputTool::Capabilities => {
            if round.responses.is_some_and(|r| !r.is_empty()) {
                return Ok(text("thanks: every declared capability answered"));
            }
            let declared = |c: &str| capabilities.get(c).is_some_and(|v| !v.is_null());
            let mut requests = Map::new();
            if declared("elicitation") {
                requests.insert("user_name".into(), elicit("What is your name?", "name", "string"));
            }
            if declared("sampling") {
                requests.insert("capital_question".into(), sample("What is the capital of France?", 100));
            }
            if declared("roots") {
                requests.insert("client_roots".into(), list_roots());
            }
            if requests.is_empty() {
                text("the client declared nothing to ask it for")
            } else {
                input_required(Value::Object(requests), None)
            }
        }
    })
}

/// `prompts/get` for [`PROMPT`].
pub(super) fn prompt(params: &Value, ctx: &RequestContext) -> Result<Value, RpcError> {
    let round = Round::of(params, ctx);
    Ok(match round.answer("user_context").and_then(|a| elicited(a, "context")) {
        Some(context) => json!({
            "description": "A prompt that needed the client's context first",
            "messages": [{ "role": "user", "content": { "type": "text", "text": format!("Use this context: {context}") } }],
        }),
        None => ctx.input_required(
            json!({ "user_context": elicit("What context should the prompt use?", "context", "string") }),
            None,
        ),
    })
}
