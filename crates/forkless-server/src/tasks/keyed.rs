//! Re-issue that never runs twice (PROTOCOL section 14), a forkless extension of 2026-07-28
//! (`dev.forkless/idempotency`, advertised by `server/discover`): a request whose `_meta`
//! carries `dev.forkless/idempotencyKey` runs at most once per key and principal within the
//! key's time to live, on any node sharing the store.
//!
//! A keyed request is a task record of kind [`TaskKind::Request`] whose id is derived from
//! the principal and the key (SHA-256, so two principals' keys never meet), created before the
//! request runs: the first request to create it runs; every other (a re-issue after a cut
//! response stream, on this node or another) waits for that execution's outcome and gets the
//! same answer, or is refused when its method and parameters differ from the first's
//! (`data.reason: "idempotency_key_reused"`). A closed response stream does not cancel a keyed
//! request; a `notifications/cancelled` carrying the key does. An execution whose process died
//! ends `failed`/`owner_lost` by the task rules, so a re-issue gets that error and the work is
//! never run a second time. `tasks/…` never reads a keyed request.
//!
//! It owns the key's wire form, the claim and the wait; not the records (the store's), the
//! decision of what a lost owner means (the core's) or how the answer is sent (`stateless`).

use std::sync::Arc;
use std::time::Duration;

use forkless_core::task::{FailCause, TaskStatus};
use forkless_core::{Epoch, NewTask, OnOwnerLost, Outcome, TaskId, TaskKind, TaskOwner, TaskRecord};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;

use super::{Live, TaskTable, records::transact, store_failed, wire};
use crate::clock::now;
use crate::jsonrpc::RpcError;

/// The extension's identifier in `server/discover`.
pub const IDEMPOTENCY_EXTENSION: &str = "dev.forkless/idempotency";

/// Where a request carries its key: `_meta["dev.forkless/idempotencyKey"]`.
pub const IDEMPOTENCY_KEY: &str = "dev.forkless/idempotencyKey";

/// The longest key accepted, in bytes.
const MAX_KEY_LEN: usize = 255;

/// How long keyed requests are kept, and how often a waiting re-issue reads the first
/// execution's record. Every field is a setting of [`crate::ServerConfig::idempotency`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdempotencyLimits {
    /// How long a key is remembered after its first request (a re-issue after it runs as a new
    /// request). Default 1 hour.
    pub ttl: Duration,
    /// How often a re-issue waiting for an execution on another node reads its record (one on
    /// the same node is woken at once). Default 100 ms.
    pub poll_interval: Duration,
}

impl Default for IdempotencyLimits {
    fn default() -> Self {
        Self { ttl: Duration::from_secs(3600), poll_interval: Duration::from_millis(100) }
    }
}

/// The key a request carries, as the store knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    id: TaskId,
    fingerprint: [u8; 32],
}

fn refused(why: &str, reason: &str) -> RpcError {
    RpcError::invalid_params(why).with_data(json!({ "reason": reason }))
}

/// The record id of `key` for `principal`.
fn derive(principal: Option<&str>, key: &str) -> TaskId {
    let mut h = Sha256::new();
    h.update(b"forkless idempotency key v1\0");
    let principal = principal.unwrap_or_default().as_bytes();
    h.update((principal.len() as u64).to_be_bytes());
    h.update(principal);
    h.update(key.as_bytes());
    let digest = h.finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    TaskId::from_bytes(id)
}

/// The text of a request's key in its `_meta`, if it carries one.
fn key_text(params: Option<&Value>) -> Result<Option<&str>, RpcError> {
    let Some(key) = params.and_then(|p| p.get("_meta")).and_then(|m| m.get(IDEMPOTENCY_KEY)) else {
        return Ok(None);
    };
    let key = key
        .as_str()
        .ok_or_else(|| refused("the idempotency key must be a string", "idempotency_key_malformed"))?;
    if key.is_empty() || key.len() > MAX_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(refused(
            &format!("the idempotency key must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
            "idempotency_key_malformed",
        ));
    }
    Ok(Some(key))
}

impl Key {
    /// The key request `method` with `params` carries for `principal`: `None` without one,
    /// `-32602` for a malformed one.
    pub(crate) fn of(
        principal: Option<&str>,
        method: &str,
        params: Option<&Value>,
    ) -> Result<Option<Self>, RpcError> {
        let Some(key) = key_text(params)? else { return Ok(None) };
        // The request as the key vouches for it: its method and parameters, but not `_meta`
        // (a progress token or a log level may differ from one try to the next).
        let mut body = params.cloned().unwrap_or(Value::Null);
        if let Some(p) = body.as_object_mut() {
            p.remove("_meta");
        }
        let mut h = Sha256::new();
        h.update(method.as_bytes());
        h.update([0]);
        // serde_json's maps are sorted, so equal parameters serialize alike.
        h.update(body.to_string().as_bytes());
        Ok(Some(Self { id: derive(principal, key), fingerprint: h.finalize().into() }))
    }

    /// The key a `notifications/cancelled` names in its `_meta`, to cancel that execution.
    pub(crate) fn cancelled_by(principal: Option<&str>, params: Option<&Value>) -> Option<TaskId> {
        key_text(params).ok().flatten().map(|k| derive(principal, k))
    }
}

/// What claiming a key found.
pub(crate) enum Claim {
    /// This is the key's first request: run it, and [`Run::finish`] with its outcome.
    Run(Run),
    /// The key's execution already ended (or ended while this waited): its answer.
    Done(Result<Value, RpcError>),
}

/// The one execution of a keyed request, on this node.
pub(crate) struct Run {
    table: Arc<TaskTable>,
    id: TaskId,
    live: Arc<Live>,
}

impl Run {
    /// Cancelled by a `notifications/cancelled` naming the key and at shutdown; never by the
    /// client closing the response.
    pub(crate) fn cancellation(&self) -> CancellationToken {
        self.live.cancel.clone()
    }

    /// Keep the execution's `outcome` under the key (the answer a re-issue gets).
    pub(crate) async fn finish(self, outcome: &Result<Value, RpcError>) {
        let outcome = match outcome {
            Ok(result) => Outcome::Result(wire::text(result)),
            Err(error) => Outcome::Error(wire::text(&error.to_json())),
        };
        let epoch = self.live.epoch;
        match transact(&*self.table.records, self.id, |t| t.on_finished(outcome.clone(), epoch, now())).await
        {
            Ok(_) | Err(forkless_store::Error::Task(_) | forkless_store::Error::TaskUnknown) => {}
            Err(e) => {
                tracing::warn!(error = %e, "a keyed request's answer could not be kept; a re-issue waits for its settlement")
            }
        }
        self.table.end_live(self.id, epoch);
        // Every re-issue waiting on this node reads the answer now.
        self.live.changed.notify_waiters();
    }
}

/// The answer a keyed request's ended record holds.
fn answer_of(task: &TaskRecord) -> Option<Result<Value, RpcError>> {
    Some(match task.status() {
        TaskStatus::Completed(done) => Ok(wire::value(&done.result)),
        TaskStatus::Failed(failed) => Err(match &failed.cause {
            FailCause::Error(error) => error_of(&wire::value(error)),
            FailCause::OwnerLost => wire::owner_lost(),
        }),
        TaskStatus::Cancelled(_) => {
            Err(RpcError::new(crate::error::REQUEST_CANCELLED, "the request was cancelled"))
        }
        TaskStatus::Working(_) | TaskStatus::InputRequired(_) => return None,
    })
}

fn error_of(v: &Value) -> RpcError {
    let code = v.get("code").and_then(Value::as_i64).unwrap_or(crate::error::INTERNAL_ERROR);
    let message = v.get("message").and_then(Value::as_str).unwrap_or_default();
    let error = RpcError::new(code, message);
    match v.get("data") {
        Some(data) => error.with_data(data.clone()),
        None => error,
    }
}

impl TaskTable {
    /// Claim `key` for `principal`: run the request if this is its first, else wait for the
    /// first execution's answer.
    pub(crate) async fn claim(self: &Arc<Self>, key: &Key, principal: Option<&str>) -> Claim {
        let task = TaskRecord::new(NewTask {
            id: key.id,
            kind: TaskKind::Request { fingerprint: key.fingerprint },
            principal: principal.map(str::to_owned),
            owner: TaskOwner { node: self.records.node().map(|n| n.to_string()), epoch: Epoch::new(1) },
            on_owner_lost: OnOwnerLost::Fail,
            inputs: None,
            ttl: self.keys.ttl,
            poll_interval: self.keys.poll_interval,
            now: now(),
        });
        loop {
            let live = self.start_live(&task);
            match self.records.create(&task).await {
                Ok(()) => {
                    live.stored();
                    self.metrics.keyed_request("ran");
                    return Claim::Run(Run { table: self.clone(), id: key.id, live });
                }
                Err(forkless_store::Error::TaskExists) => self.end_live(key.id, live.epoch),
                Err(e) => {
                    self.end_live(key.id, live.epoch);
                    return Claim::Done(Err(store_failed(&e)));
                }
            }
            match self.wait_for(key).await {
                Some(answer) => {
                    let reused =
                        answer.as_ref().err().and_then(|e| e.data.as_ref()).and_then(|d| d.get("reason"))
                            == Some(&json!("idempotency_key_reused"));
                    self.metrics.keyed_request(if reused { "refused" } else { "answered" });
                    return Claim::Done(answer);
                }
                // Expired and removed meanwhile: the key is new again.
                None => continue,
            }
        }
    }

    /// Wait until the execution of `key` ended: its answer, a refusal, or `None` if its record
    /// is gone.
    async fn wait_for(&self, key: &Key) -> Option<Result<Value, RpcError>> {
        loop {
            let local = self.live().get(&key.id).cloned();
            let changed = local.as_ref().map(|l| l.changed.notified());
            tokio::pin!(changed);
            if let Some(c) = changed.as_mut().as_pin_mut() {
                c.enable();
            }
            let task = match self.records.load(key.id).await {
                Ok(Some(t)) => t.value,
                Ok(None) => return None,
                Err(e) => return Some(Err(store_failed(&e))),
            };
            if task.expires_at() <= now() {
                // Remembered past its time: forgotten now, and the key is new again.
                let _ = self.records.expire(now()).await;
                return None;
            }
            if task.kind() != (TaskKind::Request { fingerprint: key.fingerprint }) {
                return Some(Err(refused(
                    "the idempotency key was used with another method or other parameters",
                    "idempotency_key_reused",
                )));
            }
            if let Some(answer) = answer_of(&task) {
                return Some(answer);
            }
            match changed.as_pin_mut() {
                Some(c) => {
                    let _ = tokio::time::timeout(self.keys.poll_interval, c).await;
                }
                None => tokio::time::sleep(self.keys.poll_interval).await,
            }
        }
    }

    /// A `notifications/cancelled` named key record `id`: cancel that execution, wherever it
    /// runs (it ends `cancelled`; a re-issue gets `-32800`).
    pub(crate) async fn cancel_key(&self, id: TaskId, principal: Option<&str>) {
        let Ok(Some(task)) = self.records.load(id).await else { return };
        if task.value.principal() != principal || task.value.kind() == TaskKind::Task {
            return;
        }
        if let Err(e) = transact(&*self.records, id, |t| Ok(t.on_cancel_requested(now()))).await {
            tracing::warn!(error = %e, "cancelling a keyed request failed");
        }
        self.stop(id);
    }
}
