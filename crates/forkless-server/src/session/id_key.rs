//! JSON-RPC ids as map keys: what JSON-RPC tells apart, told apart without allocating for
//! the common integer ids.

use serde_json::Value;

/// A JSON-RPC id as a key of the session's maps (pending requests, requests in flight). Ids are strings or numbers, and `1` and `"1"`
/// are different ids; the common integer ids are keys without an allocation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum IdKey {
    Int(i64),
    Uint(u64),
    Text(String),
    /// Any other JSON (a float, or what a peer should not send), by its serialization.
    Other(String),
}

pub(crate) fn id_key(id: &Value) -> IdKey {
    match id {
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => IdKey::Int(i),
            (None, Some(u)) => IdKey::Uint(u),
            (None, None) => IdKey::Other(n.to_string()),
        },
        Value::String(s) => IdKey::Text(s.clone()),
        other => IdKey::Other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn id_keys_tell_apart_what_json_rpc_tells_apart() {
        let ids =
            [json!(1), json!("1"), json!(1.5), json!(-1), json!(u64::MAX), json!("u"), json!(null), json!(0)];
        for (i, a) in ids.iter().enumerate() {
            assert_eq!(id_key(a), id_key(&a.clone()), "{a} is its own key");
            for b in &ids[i + 1..] {
                assert_ne!(id_key(a), id_key(b), "{a} and {b} are different ids");
            }
        }
    }
}
