//! The demo server's resources: `resources/list`, `resources/templates/list`,
//! `resources/read`, and which URIs `resources/subscribe` accepts.
//!
//! All are the `test://` fixtures of the MCP conformance suite; none changes over time, so a
//! subscription is recorded but never triggers `notifications/resources/updated`.

use forkless_server::RpcError;
use serde::Deserialize;
use serde_json::{Value, json};

use super::RESOURCE_NOT_FOUND;
use super::tools::RED_PIXEL_PNG;

const STATIC_TEXT: &str = "test://static-text";
const STATIC_BINARY: &str = "test://static-binary";
const WATCHED: &str = "test://watched-resource";
const TEMPLATE: &str = "test://template/{id}/data";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

/// Longest `{id}` the template accepts; longer ones are not found.
const MAX_TEMPLATE_ID: usize = 256;

/// The `resources/list` result.
pub(super) fn list() -> Value {
    json!({
        "resources": [
            {
                "uri": STATIC_TEXT,
                "name": "Static text resource",
                "description": "A static text resource for testing",
                "mimeType": "text/plain"
            },
            {
                "uri": STATIC_BINARY,
                "name": "Static binary resource",
                "description": "A static binary resource (a 1x1 PNG) for testing",
                "mimeType": "image/png"
            },
            {
                "uri": WATCHED,
                "name": "Watched resource",
                "description": "A resource that can be subscribed to",
                "mimeType": "text/plain"
            }
        ]
    })
}

/// The `resources/templates/list` result.
pub(super) fn list_templates() -> Value {
    json!({
        "resourceTemplates": [{
            "uriTemplate": TEMPLATE,
            "name": "Template resource",
            "description": "A resource template with an {id} parameter",
            "mimeType": "application/json"
        }]
    })
}

/// Params of `resources/read`, `resources/subscribe` and `resources/unsubscribe`.
#[derive(Debug, Deserialize)]
pub(super) struct UriParams {
    uri: String,
}

/// Run `resources/read`.
pub(super) fn read(params: UriParams) -> Result<Value, RpcError> {
    let uri = params.uri.as_str();
    let content = match uri {
        STATIC_TEXT => {
            json!({ "uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource." })
        }
        STATIC_BINARY => json!({ "uri": uri, "mimeType": "image/png", "blob": RED_PIXEL_PNG }),
        WATCHED => json!({ "uri": uri, "mimeType": "text/plain", "text": "Watched resource content" }),
        _ => {
            let id = template_id(uri).ok_or_else(|| not_found(uri))?;
            let text = json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") });
            json!({ "uri": uri, "mimeType": "application/json", "text": text.to_string() })
        }
    };
    Ok(json!({ "contents": [content] }))
}

/// The URI of a subscribe or unsubscribe request, if it names a resource that exists.
pub(super) fn subscribable(params: UriParams) -> Result<String, RpcError> {
    let known = matches!(params.uri.as_str(), STATIC_TEXT | STATIC_BINARY | WATCHED)
        || template_id(&params.uri).is_some();
    if known { Ok(params.uri) } else { Err(not_found(&params.uri)) }
}

/// The `{id}` of a URI matching `test://template/{id}/data`: non-empty, no `/`.
pub(super) fn template_id(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(TEMPLATE_PREFIX)?.strip_suffix(TEMPLATE_SUFFIX)?;
    let plausible = !id.is_empty() && id.len() <= MAX_TEMPLATE_ID && !id.contains('/');
    plausible.then_some(id)
}

fn not_found(uri: &str) -> RpcError {
    RpcError::new(RESOURCE_NOT_FOUND, format!("resource not found: {uri}")).with_data(json!({ "uri": uri }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(u: &str) -> UriParams {
        UriParams { uri: u.to_owned() }
    }

    #[test]
    fn template_substitutes_the_id() {
        let result = read(uri("test://template/123/data")).expect("template resource");
        let content = &result["contents"][0];
        assert_eq!(content["uri"], "test://template/123/data");
        let text: Value = serde_json::from_str(content["text"].as_str().expect("text")).expect("json text");
        assert_eq!(text, json!({ "id": "123", "templateTest": true, "data": "Data for ID: 123" }));
    }

    #[test]
    fn unknown_uris_are_not_found() {
        for bad in
            ["test://nope", "test://template//data", "test://template/a/b/data", "", "test://template/1"]
        {
            let code = read(uri(bad)).map_err(|e| e.code);
            assert_eq!(code, Err(RESOURCE_NOT_FOUND), "{bad}");
            assert!(subscribable(uri(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn listed_resources_are_readable() {
        for resource in list()["resources"].as_array().expect("array") {
            let u = resource["uri"].as_str().expect("uri");
            let mime = read(uri(u)).map(|r| r["contents"][0]["mimeType"].clone());
            assert_eq!(mime.as_ref(), Ok(&resource["mimeType"]), "{u}");
        }
        assert_eq!(subscribable(uri(WATCHED)).ok().as_deref(), Some(WATCHED));
    }
}
