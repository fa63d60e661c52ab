//! A minimal MCP client over HTTP: initialize, requests over POST (SSE or JSON answers),
//! the standalone GET stream and resumes.

use super::*;

/// What a request got back: the messages before the response, and the response.
#[derive(Debug)]
pub struct Answer {
    pub before: Vec<Value>,
    pub response: Value,
}

impl Answer {
    /// The `result`, failing the test on an error response.
    pub fn result(&self) -> &Value {
        assert!(self.response.get("error").is_none(), "error response: {}", self.response);
        &self.response["result"]
    }

    /// The `error`, failing the test on a result.
    pub fn error(&self) -> &Value {
        assert!(self.response.get("result").is_none(), "expected an error, got: {}", self.response);
        &self.response["error"]
    }

    /// The `data` of every `notifications/message` received before the response.
    pub fn log_data(&self) -> Vec<String> {
        log_data(&self.before)
    }
}

/// The string `data` of every `notifications/message` among `messages`.
pub fn log_data(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["data"].as_str().expect("string log data").to_owned())
        .collect()
}

/// A minimal MCP client session.
pub struct Session {
    http: reqwest::Client,
    pub url: String,
    pub id: String,
    next_id: u64,
}

impl Session {
    /// `initialize` + `notifications/initialized`.
    pub async fn open(url: &str) -> (Self, Value) {
        Self::open_with(url, json!({})).await
    }

    /// Like [`Self::open`], declaring `capabilities`.
    pub async fn open_with(url: &str, capabilities: Value) -> (Self, Value) {
        let http = reqwest::Client::new();
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": REVISION,
                "capabilities": capabilities,
                "clientInfo": { "name": "forkless-serve-tests", "version": "0" }
            }
        });
        let response = guard(
            "initialize",
            http.post(url)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .json(&body)
                .send(),
        )
        .await
        .expect("POST initialize");
        assert_eq!(response.status(), 200, "initialize");
        let id = response
            .headers()
            .get("mcp-session-id")
            .expect("Mcp-Session-Id on initialize")
            .to_str()
            .expect("ascii session id")
            .to_owned();
        let answer = read_answer(response, &json!(0)).await;
        let session = Self { http, url: url.to_owned(), id, next_id: 1 };
        let status = session.notify("notifications/initialized", json!({})).await;
        assert_eq!(status, 202, "notifications/initialized");
        let result = answer.result().clone();
        (session, result)
    }

    /// The same session, its requests sent to `url` (another node's endpoint).
    pub fn at(&self, url: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            id: self.id.clone(),
            next_id: self.next_id + 1000,
        }
    }

    /// `DELETE` the session; the HTTP status.
    pub async fn delete(&self) -> u16 {
        let request = self.http.delete(&self.url).header("mcp-session-id", &self.id);
        guard("DELETE", request.send()).await.expect("DELETE").status().as_u16()
    }

    fn post(&self) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", REVISION)
    }

    /// POST a notification; returns the HTTP status.
    pub async fn notify(&self, method: &str, params: Value) -> u16 {
        let body = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        let response = guard(method, self.post().json(&body).send()).await.expect("POST notification");
        response.status().as_u16()
    }

    /// POST a request and send it; the raw response (its body not read yet).
    pub async fn send(&mut self, method: &str, params: Value) -> (Value, reqwest::Response) {
        let id = json!(self.next_id);
        self.next_id += 1;
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let response = guard(method, self.post().json(&body).send()).await.expect("POST request");
        assert_eq!(response.status(), 200, "{method}");
        (id, response)
    }

    /// POST a request whatever the answer's status; the raw response.
    pub async fn send_unchecked(&mut self, method: &str, params: Value) -> reqwest::Response {
        let id = json!(self.next_id);
        self.next_id += 1;
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        guard(method, self.post().json(&body).send()).await.expect("POST request")
    }

    /// POST `initialize` whatever the answer; the raw response.
    pub async fn initialize_raw(url: &str) -> reqwest::Response {
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": { "protocolVersion": REVISION, "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } }
        });
        let request = reqwest::Client::new()
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .json(&body);
        guard("initialize", request.send()).await.expect("POST initialize")
    }

    /// A request and everything its answer carried.
    pub async fn request(&mut self, method: &str, params: Value) -> Answer {
        let (id, response) = self.send(method, params).await;
        guard(method, read_answer(response, &id)).await
    }

    /// `tools/call`.
    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> Answer {
        self.request("tools/call", json!({ "name": name, "arguments": arguments })).await
    }

    /// Open the standalone GET stream.
    pub async fn get_stream(&self) -> reqwest::Response {
        let response = guard(
            "GET",
            self.http
                .get(&self.url)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", &self.id)
                .header("mcp-protocol-version", REVISION)
                .send(),
        )
        .await
        .expect("GET stream");
        assert_eq!(response.status(), 200, "GET stream");
        response
    }
}

impl Session {
    /// Resume a stream: `GET` with `Last-Event-ID` (and `Mcp-Stream-Id` when given).
    pub async fn resume(&self, last_event_id: &str, stream_id: Option<&str>) -> reqwest::Response {
        let mut request = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", REVISION)
            .header("last-event-id", last_event_id);
        if let Some(stream) = stream_id {
            request = request.header("mcp-stream-id", stream);
        }
        let response = guard("resume", request.send()).await.expect("GET resume");
        assert_eq!(response.status(), 200, "resume from {last_event_id}");
        response
    }
}

/// Read a POST answer (SSE or JSON) up to the response with `id`.
async fn read_answer(response: reqwest::Response, id: &Value) -> Answer {
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    if content_type.starts_with("application/json") {
        let response: Value = response.json().await.expect("JSON answer");
        return Answer { before: Vec::new(), response };
    }
    assert!(content_type.starts_with("text/event-stream"), "unexpected content type {content_type:?}");
    let mut sse = SseReader::new(response);
    let mut before = Vec::new();
    while let Some((_, message)) = sse.next_message().await {
        if message.get("id") == Some(id) && message.get("method").is_none() {
            return Answer { before, response: message };
        }
        before.push(message);
    }
    panic!("SSE answer ended without the response to {id}; got {before:?}");
}
