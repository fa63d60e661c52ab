//! An SSE body read event by event, keeping `id:` and `retry:`.

use super::*;

/// One server-sent event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub data: String,
    pub retry: Option<u64>,
}

impl SseEvent {
    /// The data as JSON (`None` for the empty priming event).
    pub fn json(&self) -> Option<Value> {
        if self.data.is_empty() {
            return None;
        }
        Some(serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("bad SSE data {:?}: {e}", self.data)))
    }
}

/// Reads an SSE body event by event.
pub struct SseReader {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: Vec<u8>,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        Self { body: response.bytes_stream().boxed(), buf: Vec::new() }
    }

    /// The next event, or `None` when the body ended; a body that fails (the server died)
    /// also ends it.
    pub async fn next_event_or_end(&mut self) -> Option<SseEvent> {
        self.next_event_inner(false).await
    }

    /// The next event, or `None` when the body ended.
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        self.next_event_inner(true).await
    }

    async fn next_event_inner(&mut self, fail_on_error: bool) -> Option<SseEvent> {
        let mut event = SseEvent::default();
        let mut has_field = false;
        loop {
            while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let raw: Vec<u8> = self.buf.drain(..=pos).collect();
                let line = String::from_utf8(raw).expect("utf-8 SSE");
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if has_field {
                        return Some(event);
                    }
                    continue;
                }
                if line.starts_with(':') {
                    continue; // keep-alive comment
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                has_field = true;
                match field {
                    "id" => event.id = Some(value.to_owned()),
                    "data" => {
                        if !event.data.is_empty() {
                            event.data.push('\n');
                        }
                        event.data.push_str(value);
                    }
                    "retry" => event.retry = value.parse().ok(),
                    _ => {}
                }
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(e)) if fail_on_error => panic!("SSE body failed: {e}"),
                Some(Err(_)) => return None,
                None => return None,
            }
        }
    }

    /// The next event that carries a JSON-RPC message (skips priming events).
    pub async fn next_message(&mut self) -> Option<(SseEvent, Value)> {
        loop {
            let event = self.next_event().await?;
            if let Some(message) = event.json() {
                return Some((event, message));
            }
        }
    }
}
