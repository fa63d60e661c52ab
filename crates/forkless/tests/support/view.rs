//! What a client saw on a stream, judged as PROTOCOL section 7 asks: content events in
//! order, each the successor of the previous one; and the answer a lost request gets.

use serde_json::{Value, json};

use super::{Session, SseEvent, SseReader, guard};

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

/// The lost request's answer: an error carrying the request's own id and naming what lost it
/// (`restarted`, or `owner_lost` when another node took the session over).
pub fn assert_orphan_answer(view: &View, request: &Value, reason: &str) {
    let (_, last) = view.last().expect("events after the restart");
    let answer: Value = serde_json::from_str(last).expect("JSON");
    assert_eq!(&answer["id"], request, "the lost request's answer carries its id: {answer}");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(answer["error"]["data"]["reason"], reason, "{answer}");
}

/// A client's session whose tool call streams `count` numbered notifications, read up to #5.
pub struct Streaming {
    pub session: Session,
    pub request: Value,
    pub stream: String,
    pub seen: View,
    pub reader: SseReader,
}

pub async fn read_to_5(url: &str, count: u64) -> Streaming {
    let (mut session, _) = Session::open(url).await;
    let call =
        json!({ "name": "start-notification-stream", "arguments": { "interval": 50, "count": count } });
    let (request, response) = session.send("tools/call", call).await;
    let stream = header(&response, "mcp-stream-id");
    let (mut seen, mut reader) = (View::new(), SseReader::new(response));
    let until_5 = |m: &Value| m["params"]["data"].as_str().is_some_and(|d| d.ends_with("#5"));
    assert!(read_until(&mut reader, &mut seen, until_5).await, "read up to #5");
    Streaming { session, request, stream, seen, reader }
}

/// The client resumes `stream` after the last event of `seen` wherever `session.url` points,
/// and reads on to its lost `request`'s answer: the stream continues (`Mcp-Stream-Resumed:
/// true`) with every event it had not seen exactly once, then the error carrying the
/// request's id. `taken_over` says who answers it, for the failure message.
pub async fn resume_to_orphan_answer(
    session: &Session,
    seen: &View,
    stream: &str,
    request: &Value,
    taken_over: &str,
) {
    let last = seen.last().expect("events").0.clone();
    let response = session.resume(&last, Some(stream)).await;
    assert_eq!(response.status(), 200, "the resume is answered");
    assert_eq!(header(&response, "mcp-stream-resumed"), "true", "the stream continues from the shared log");
    let mut after = vec![seen.last().cloned().expect("the cursor")];
    let mut reader = SseReader::new(response);
    assert!(
        read_until(&mut reader, &mut after, is_response_to(request)).await,
        "{taken_over} answers the lost request"
    );
    assert_orphan_answer(&after, request, "owner_lost");
    // Every event after the cursor exactly once (accept asserts gap-free order), then the answer.
    let mut whole = seen.clone();
    whole.extend(after.into_iter().skip(1));
    for (i, (id, _)) in whole.iter().enumerate() {
        assert!(id.ends_with(&format!(".{}", i + 1)), "one gap-free history: {id} at {i}");
    }
}
