//! Driving a task to its end (the tasks extension, SEP-2663): remember its id, poll
//! `tasks/get` at its `pollIntervalMs`, answer its input requests through `tasks/update`, and
//! hand back its result, error or cancellation; then forget the id. A poll whose answer was
//! lost is simply polled again (reading a task changes nothing).

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{CurrentClient, lost, rpc_outcome};
use crate::error::Error;

/// The shortest and longest pause between two polls, whatever the task suggests.
const POLL_FLOOR: Duration = Duration::from_millis(10);
const POLL_CEILING: Duration = Duration::from_secs(30);

impl CurrentClient {
    /// Poll task `id` to its end and return its outcome, remembering it in the task log until
    /// then.
    pub(super) async fn drive(&self, id: &str) -> Result<Value, Error> {
        let log = &self.settings.task_log;
        log.remember(id).map_err(|e| Error::TaskLog(e.to_string()))?;
        let outcome = self.poll(id).await;
        // A lost poll is not the task's outcome: the id stays for a later resume.
        if !matches!(&outcome, Err(e) if lost(e)) {
            log.forget(id).map_err(|e| Error::TaskLog(e.to_string()))?;
        }
        outcome
    }

    /// Poll every task the log holds (left by an earlier run of this client) to its end: each
    /// id with its outcome.
    pub async fn resume_tasks(&self) -> Result<Vec<(String, Result<Value, Error>)>, Error> {
        let ids = self.settings.task_log.pending().map_err(|e| Error::TaskLog(e.to_string()))?;
        let mut outcomes = Vec::with_capacity(ids.len());
        for id in ids {
            let outcome = self.drive(&id).await;
            outcomes.push((id, outcome));
        }
        Ok(outcomes)
    }

    async fn poll(&self, id: &str) -> Result<Value, Error> {
        let mut lost_polls = 0;
        loop {
            let task = match self.exchange("tasks/get", task_params(id)).await {
                Ok(task) => task,
                Err(e) if lost(&e) && lost_polls < self.settings.reissues => {
                    lost_polls += 1;
                    tokio::time::sleep(self.settings.reissue_backoff * lost_polls).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            lost_polls = 0;
            match task.get("status").and_then(Value::as_str) {
                Some("completed") => {
                    return task
                        .get("result")
                        .cloned()
                        .ok_or_else(|| Error::Protocol(format!("completed without result: {task}")));
                }
                Some("failed") => {
                    let error = task.get("error").cloned().unwrap_or(Value::Null);
                    return rpc_outcome(&json!({ "error": error }));
                }
                Some("cancelled") => return Err(Error::TaskCancelled(id.to_owned())),
                Some("input_required") => self.answer_inputs(id, &task).await?,
                Some("working") => {}
                other => return Err(Error::Protocol(format!("task {id} has status {other:?}"))),
            }
            let suggested =
                task.get("pollIntervalMs").and_then(Value::as_u64).map_or(POLL_FLOOR, Duration::from_millis);
            tokio::time::sleep(suggested.clamp(POLL_FLOOR, POLL_CEILING)).await;
        }
    }

    /// Answer the task's outstanding input requests through the client's handler.
    async fn answer_inputs(&self, id: &str, task: &Value) -> Result<(), Error> {
        let Some(requests) = task.get("inputRequests").and_then(Value::as_object) else { return Ok(()) };
        let answers = self.answer_inputs_of(requests).await;
        let mut params = task_params(id);
        params.insert("inputResponses".into(), Value::Object(answers));
        // Applied once by the server whatever the number of tries (an answer to a key no
        // longer outstanding is ignored), so a lost acknowledgement is simply sent again.
        let mut tries = 0;
        loop {
            match self.exchange("tasks/update", params.clone()).await {
                Err(e) if lost(&e) && tries < self.settings.reissues => tries += 1,
                other => return other.map(drop),
            }
        }
    }
}

impl CurrentClient {
    /// The client's answers to `requests` (input request key → its request), through its
    /// handler; a refusal is answered as a declined elicitation.
    pub(super) async fn answer_inputs_of(&self, requests: &Map<String, Value>) -> Map<String, Value> {
        let mut answers = Map::new();
        for (key, request) in requests {
            let method = request.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
            let answer = self.settings.input.handle(method, request.get("params").cloned()).await;
            let answer = answer.unwrap_or_else(|e| json!({ "action": "decline", "error": e.message }));
            answers.insert(key.clone(), answer);
        }
        answers
    }
}

fn task_params(id: &str) -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("taskId".into(), json!(id));
    params
}
