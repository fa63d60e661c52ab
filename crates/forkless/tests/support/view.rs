//! What a client saw on a stream, judged as PROTOCOL section 7 asks: content events in
//! order, each the successor of the previous one; and the answer a lost request gets.

use serde_json::Value;

use super::{SseEvent, SseReader, guard};

/// What a client accepted on one stream, in order: `(event id, data)`.
pub type View = Vec<(String, String)>;

pub fn seq_of(id: &str) -> u64 {
    id.rsplit_once('.').and_then(|(_, s)| s.parse().ok()).unwrap_or_else(|| panic!("not an event id: {id}"))
}

pub fn header(response: &reqwest::Response, name: &str) -> String {
    response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// Accept `event` into `view` as a client following PROTOCOL section 7 would: content events
/// only, each the successor of the previous one.
pub fn accept(view: &mut View, event: &SseEvent) {
    let Some(id) = &event.id else { return };
    if event.data.is_empty() {
        return; // the priming event
    }
    let expected = view.last().map_or(1, |(last, _)| seq_of(last) + 1);
    assert_eq!(seq_of(id), expected, "gap-free, in order: {id} after {:?}", view.last());
    view.push((id.clone(), event.data.clone()));
}

/// Read events into `view` until `stop` says so or the body ends; returns whether it stopped.
pub async fn read_until(reader: &mut SseReader, view: &mut View, stop: impl Fn(&Value) -> bool) -> bool {
    while let Some(event) = guard("next event", reader.next_event_or_end()).await {
        accept(view, &event);
        if event.json().is_some_and(|m| stop(&m)) {
            return true;
        }
    }
    false
}

pub fn is_response_to(id: &Value) -> impl Fn(&Value) -> bool + '_ {
    move |m: &Value| m.get("id") == Some(id) && m.get("method").is_none()
}

/// The lost request's answer: an error carrying the request's own id.
pub fn assert_orphan_answer(view: &View, request: &Value) {
    let (_, last) = view.last().expect("events after the restart");
    let answer: Value = serde_json::from_str(last).expect("JSON");
    assert_eq!(&answer["id"], request, "the lost request's answer carries its id: {answer}");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
}
