//! The `response_format` of an OpenAI-compatible request whose task has an output schema:
//! `{"type": "json_schema", "json_schema": {"name": "output", "schema": …}}`, spliced into the
//! encoded body as its first key.
//!
//! `strict` is not set: strict mode refuses most schemas (every property required, no
//! `additionalProperties`), and the session validates the answer itself anyway. A configured
//! `extra.response_format` wins (the body never gets the key twice). It never builds the rest
//! of the body (`request.rs`, `body_cache.rs`).

use bytes::Bytes;
use serde_json::{Map, Value, json};

/// The `name` the schema is sent under.
pub(super) const SCHEMA_NAME: &str = "output";

/// The session's current `response_format`, encoded once per schema.
#[derive(Default)]
pub(super) struct ResponseFormat {
    schema: Option<Value>,
    /// `"response_format":{…},` ready to splice after the body's `{`.
    encoded: Option<String>,
}

impl ResponseFormat {
    /// The schema of the requests from now on (`None`: no `response_format`), unless `extra`
    /// configures one.
    pub(super) fn set(&mut self, schema: Option<&Value>, extra: &Map<String, Value>) {
        let schema = schema.filter(|_| !extra.contains_key("response_format"));
        if self.schema.as_ref() == schema {
            return;
        }
        self.schema = schema.cloned();
        self.encoded = schema.map(|schema| {
            let format = json!({
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": schema},
            });
            format!("\"response_format\":{format},")
        });
    }

    /// `body` (a JSON object's text) with the `response_format` key added, when one is set.
    pub(super) fn apply(&self, body: Bytes) -> Bytes {
        match (&self.encoded, body.first()) {
            (Some(key), Some(b'{')) => {
                let mut out = Vec::with_capacity(body.len() + key.len());
                out.push(b'{');
                out.extend_from_slice(key.as_bytes());
                let rest = &body[1..];
                if rest.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}') {
                    // An empty object: no trailing comma.
                    out.pop();
                }
                out.extend_from_slice(rest);
                Bytes::from(out)
            }
            _ => body,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splices_the_format_as_the_first_key() {
        let mut f = ResponseFormat::default();
        let body = Bytes::from_static(br#"{"model":"m"}"#);
        assert_eq!(f.apply(body.clone()), body);
        f.set(Some(&json!({"type": "object"})), &Map::new());
        let v: Value = serde_json::from_slice(&f.apply(body.clone())).unwrap();
        assert_eq!(v["model"], "m");
        assert_eq!(v["response_format"]["type"], "json_schema");
        assert_eq!(
            v["response_format"]["json_schema"]["schema"]["type"],
            "object"
        );
        let empty: Value = serde_json::from_slice(&f.apply(Bytes::from_static(b"{}"))).unwrap();
        assert!(empty["response_format"].is_object());
        f.set(None, &Map::new());
        assert_eq!(f.apply(body.clone()), body);
    }

    #[test]
    fn a_configured_response_format_wins() {
        let mut f = ResponseFormat::default();
        let mut extra = Map::new();
        extra.insert("response_format".into(), json!({"type": "json_object"}));
        f.set(Some(&json!({"type": "object"})), &extra);
        let body = Bytes::from_static(br#"{"model":"m"}"#);
        assert_eq!(f.apply(body.clone()), body);
    }
}
