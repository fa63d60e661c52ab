//! Entry points for fuzzers (`fuzz/`, nightly cargo-fuzz): the POST body classifier and the
//! header checks, on arbitrary input. Not a stable API.

use http::HeaderMap;

/// Classify a POST body: `Ok` with how many messages it holds, or the typed refusal's reason.
pub fn classify_body(bytes: &[u8]) -> Result<usize, &'static str> {
    match crate::jsonrpc::parse(bytes) {
        Ok(body) => Ok(body.messages.len()),
        Err(e) => Err(e.reason()),
    }
}

/// Run every header check a request goes through before it reaches the session: one value
/// per MCP header, `MCP-Protocol-Version`, `Accept`, `Content-Type`. Returns the first
/// refusal's reason.
pub fn check_headers(headers: &HeaderMap) -> Result<(), &'static str> {
    crate::request::check_single_valued(headers).map_err(|e| e.reason())?;
    crate::request::protocol_version(headers).map_err(|e| e.reason())?;
    let _ = (crate::request::accepts(headers, "text/event-stream"), crate::request::is_json(headers));
    Ok(())
}
