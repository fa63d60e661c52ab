//! Asking the client for input with one API whatever the revision: a handler calls
//! [`crate::RequestContext::ask`] (or [`crate::RequestContext::elicit`]) and gets the client's
//! answer. In the session revisions that is a server-to-client request on the request's
//! stream, answered by the client's POST. In 2026-07-28 there is no stream to ask on: the first
//! time a key is asked, the round stops (the handler returns the error `ask` gave it, with
//! `?`) and the server answers with an `InputRequiredResult` naming every key asked; the
//! client retries with `inputResponses`, and the handler runs again from the start, now
//! getting the answers. The answers of earlier rounds travel sealed in `requestState`.
//!
//! So in 2026-07-28 a handler runs once per round up to its first unanswered question: it
//! should ask before it does anything it must not repeat.
//!
//! This module owns a request's rounds (what was answered, what was asked) and turning an
//! unanswered round into its result. Sealing is [`crate::request_state`]'s.

use std::sync::{Mutex, PoisonError};

use serde_json::{Map, Value, json};

use crate::jsonrpc::RpcError;

/// The code of the error a stopped 2026-07-28 round becomes ([`AskError::Unanswered`]). It
/// never reaches a client: the server answers the request with an `InputRequiredResult`.
pub const INPUT_REQUIRED: i64 = -32_099;

/// Why [`crate::RequestContext::ask`] has no answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// 2026-07-28: not answered yet. Return it (`?` makes it the handler's [`RpcError`]) and
    /// the server asks the client in its answer to this round.
    #[error("input `{0}` is required first")]
    Unanswered(String),
    /// The session revisions: the request could not reach the client, or the client answered
    /// it with an error.
    #[error(transparent)]
    Failed(#[from] crate::session::SendError),
}

impl From<AskError> for RpcError {
    fn from(e: AskError) -> Self {
        match e {
            AskError::Unanswered(_) => Self::new(INPUT_REQUIRED, e.to_string()),
            AskError::Failed(failed) => Self::internal(format!("the client did not answer: {failed}")),
        }
    }
}

/// One 2026-07-28 request's rounds: the answers it has, and the questions asked this round.
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    /// By key: the answers sealed in the `requestState` of earlier rounds, then this round's
    /// `inputResponses`.
    answers: Map<String, Value>,
    asked: Mutex<Map<String, Value>>,
}

impl Rounds {
    /// The rounds of a request that came with `earlier` answers (from its state) and
    /// `params.inputResponses`.
    pub(crate) fn new(earlier: Map<String, Value>, params: Option<&Value>) -> Self {
        let mut answers = earlier;
        if let Some(now) = params.and_then(|p| p.get("inputResponses")).and_then(Value::as_object) {
            answers.extend(now.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Self { answers, asked: Mutex::default() }
    }

    pub(crate) const fn answers(&self) -> &Map<String, Value> {
        &self.answers
    }

    /// The answer to `key`, or (recorded as asked) the error that stops the round.
    pub(crate) fn answer(&self, key: &str, method: &str, params: Value) -> Result<Value, AskError> {
        if let Some(answer) = self.answers.get(key) {
            return Ok(answer.clone());
        }
        let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        asked.insert(key.to_owned(), json!({ "method": method, "params": params }));
        Err(AskError::Unanswered(key.to_owned()))
    }

    /// What the round asked and did not get, if the handler stopped on it: the
    /// `inputRequests` of the result that asks for them.
    pub(crate) fn unanswered(&self, out: &Result<Value, RpcError>) -> Option<Map<String, Value>> {
        let asked = std::mem::take(&mut *self.asked.lock().unwrap_or_else(PoisonError::into_inner));
        match out {
            Err(e) if e.code == INPUT_REQUIRED && !asked.is_empty() => Some(asked),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_answers_what_it_has_and_asks_for_the_rest() {
        let earlier: Map<String, Value> = [("a".to_owned(), json!(1))].into_iter().collect();
        let rounds = Rounds::new(earlier, Some(&json!({ "inputResponses": { "b": 2 } })));
        assert_eq!(rounds.answer("a", "elicitation/create", json!({})).ok(), Some(json!(1)));
        assert_eq!(rounds.answer("b", "elicitation/create", json!({})).ok(), Some(json!(2)));
        let stop = rounds.answer("c", "roots/list", json!({})).map_err(RpcError::from);
        let asked = rounds.unanswered(&stop).expect("the round stopped on c");
        assert_eq!(Value::Object(asked), json!({ "c": { "method": "roots/list", "params": {} } }));
        // A handler that swallowed the stop and answered anyway is answered as it said.
        let _ = rounds.answer("d", "roots/list", json!({}));
        assert_eq!(rounds.unanswered(&Ok(json!({}))), None);
    }
}
