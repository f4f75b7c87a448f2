//! The chunks that are not content: token usage (every server's spelling of cache reads and
//! cache writes) and errors reported inside a 200 stream (`{"error": …}` and vLLM's bare
//! `{"object":"error", …}`), with `usage` as typed lenient counts both chunk paths read. Pure
//! functions of one chunk; no state, no events.

use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::clip;
use crate::message::{StopReason, Usage};
use crate::model::ModelOutcome;

/// Longest server error text kept from a stream.
const STREAM_ERROR_MAX: usize = 500;

/// A `usage` object as Rookery's [`Usage`]. Cache reads: `prompt_tokens_details.cached_tokens`
/// (OpenAI), `prompt_cache_hit_tokens` (DeepSeek), `cache_read_input_tokens` (LiteLLM);
/// cache writes: `prompt_tokens_details.cache_write_tokens` (OpenRouter),
/// `prompt_tokens_details.cache_creation_tokens`,
/// `prompt_tokens_details.cache_creation_input_tokens`, `cache_creation_input_tokens`
/// (LiteLLM, Anthropic-style gateways); the first of each list that is a count wins.
///
/// Lenient like a `Value` lookup: a count that is not an unsigned integer (a float, a string,
/// `null`, a negative number) counts as absent, as does a `prompt_tokens_details` that is not
/// an object; unknown keys are ignored. The chunk's fast path parses it straight from the text
/// (a repeated key fails there, and the chunk goes to the general path), the general path from
/// its `Value` through [`map_usage`]: one set of rules for both.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct WireUsage {
    prompt_tokens: Count,
    completion_tokens: Count,
    total_tokens: Count,
    prompt_tokens_details: Lenient<Details>,
    prompt_cache_hit_tokens: Count,
    cache_read_input_tokens: Count,
    cache_creation_input_tokens: Count,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Details {
    cached_tokens: Count,
    cache_write_tokens: Count,
    cache_creation_tokens: Count,
    cache_creation_input_tokens: Count,
}

impl WireUsage {
    pub(super) fn usage(&self) -> Usage {
        let details = self.prompt_tokens_details.object();
        let detail = |f: fn(&Details) -> &Count| details.and_then(|d| f(d).count());
        let prompt = self.prompt_tokens.count().unwrap_or(0);
        let output = self.completion_tokens.count().unwrap_or(0);
        Usage {
            cache_read: detail(|d| &d.cached_tokens)
                .or(self.prompt_cache_hit_tokens.count())
                .or(self.cache_read_input_tokens.count())
                .unwrap_or(0),
            cache_write: detail(|d| &d.cache_write_tokens)
                .or(detail(|d| &d.cache_creation_tokens))
                .or(detail(|d| &d.cache_creation_input_tokens))
                .or(self.cache_creation_input_tokens.count())
                .unwrap_or(0),
            output,
            total: self
                .total_tokens
                .count()
                .unwrap_or(prompt.saturating_add(output)),
        }
    }
}

/// A `usage` object of the general path (see [`WireUsage`]).
pub(super) fn map_usage(usage: &Value) -> Usage {
    // Every value deserializes into the lenient fields; nothing can fail here.
    WireUsage::deserialize(usage)
        .map(|u| u.usage())
        .unwrap_or_default()
}

/// A token count: an unsigned integer, or absent whatever else the value is.
type Count = Lenient<IgnoredAny>;

/// Any JSON value, read without failing on its type: an unsigned integer, an object read as `T`,
/// or anything else (read and dropped).
#[derive(Debug, Default)]
pub(super) enum Lenient<T> {
    Count(u64),
    Object(T),
    #[default]
    Other,
}

impl<T> Lenient<T> {
    fn count(&self) -> Option<u64> {
        match self {
            Lenient::Count(n) => Some(*n),
            _ => None,
        }
    }

    pub(super) fn object(&self) -> Option<&T> {
        match self {
            Lenient::Object(t) => Some(t),
            _ => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Lenient<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Lenient<T>, E> {
                Ok(Lenient::Count(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Lenient<T>, E> {
                Ok(u64::try_from(v).map_or(Lenient::Other, Lenient::Count))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Lenient<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Lenient::Object)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Lenient<T>, A::Error> {
                IgnoredAny.visit_seq(seq).map(|_| Lenient::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Lenient<T>, E> {
                Ok(Lenient::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Lenient<T>, E> {
                Ok(Lenient::Other)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Lenient<T>, E> {
                Ok(Lenient::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Lenient<T>, E> {
                Ok(Lenient::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A chunk reporting an error: `{"error": {"message": …}}`, `{"error": "text"}`, or the bare
/// `{"object": "error", "message": …, "code": …}` of older vLLM versions. Retried as `failed`.
pub(super) fn stream_error(chunk: &Value) -> Option<ModelOutcome> {
    let err = match chunk.get("error").filter(|e| !e.is_null()) {
        Some(e) => e,
        None if chunk.get("object").and_then(Value::as_str) == Some("error") => chunk,
        None => return None,
    };
    let message = match err {
        Value::String(s) => s.clone(),
        _ => err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string()),
    };
    Some(ModelOutcome::error(
        StopReason::Failed,
        format!("error in stream: {}", clip(&message, STREAM_ERROR_MAX)),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cache_reads_and_writes_in_each_spelling() {
        let u = |v: Value| {
            let u = map_usage(&v);
            (u.cache_read, u.cache_write, u.output, u.total)
        };
        assert_eq!(
            u(json!({"prompt_tokens": 10, "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 6}})),
            (4, 6, 2, 12)
        );
        assert_eq!(
            u(
                json!({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 30,
                "cache_creation_input_tokens": 7, "cache_read_input_tokens": 3})
            ),
            (3, 7, 2, 30)
        );
        assert_eq!(
            u(
                json!({"prompt_tokens": 5, "completion_tokens": null, "total_tokens": null,
                "prompt_cache_hit_tokens": 1})
            ),
            (1, 0, 0, 5)
        );
    }

    /// The rules as they were written before the typed parse: lookups in a `Value` tree.
    fn by_lookups(usage: &Value) -> Usage {
        let first = |paths: &[&[&str]]| {
            paths.iter().find_map(|path| {
                path.iter()
                    .try_fold(usage, |v, key| v.get(key))
                    .and_then(Value::as_u64)
            })
        };
        let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        let (prompt, output) = (n("prompt_tokens"), n("completion_tokens"));
        Usage {
            cache_read: first(&[
                &["prompt_tokens_details", "cached_tokens"],
                &["prompt_cache_hit_tokens"],
                &["cache_read_input_tokens"],
            ])
            .unwrap_or(0),
            cache_write: first(&[
                &["prompt_tokens_details", "cache_write_tokens"],
                &["prompt_tokens_details", "cache_creation_tokens"],
                &["prompt_tokens_details", "cache_creation_input_tokens"],
                &["cache_creation_input_tokens"],
            ])
            .unwrap_or(0),
            output,
            total: usage
                .get("total_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(prompt.saturating_add(output)),
        }
    }

    #[test]
    fn the_typed_usage_reads_every_shape_as_the_lookups_did() {
        let cases = [
            r#"{}"#,
            r#"{"prompt_tokens":10,"completion_tokens":2}"#,
            r#"{"prompt_tokens":18446744073709551615,"completion_tokens":5}"#,
            r#"{"prompt_tokens":1e3,"completion_tokens":-2,"total_tokens":"7"}"#,
            r#"{"prompt_tokens":3.0,"completion_tokens":true,"total_tokens":[1]}"#,
            r#"{"prompt_tokens":{"a":1},"completion_tokens":null,"total_tokens":99999999999999999999}"#,
            r#"{"prompt_tokens_details":{"cached_tokens":null,"cache_write_tokens":2.5},"prompt_cache_hit_tokens":4}"#,
            r#"{"prompt_tokens_details":{"cached_tokens":"1","cache_creation_tokens":6},"cache_read_input_tokens":8}"#,
            r#"{"prompt_tokens_details":{"cache_creation_input_tokens":9},"cache_creation_input_tokens":1}"#,
            r#"{"prompt_tokens_details":[{"cached_tokens":1}],"prompt_cache_hit_tokens":-1,"cache_read_input_tokens":2}"#,
            r#"{"prompt_tokens_details":7,"cache_creation_input_tokens":3,"extra":{"deep":[1,{"x":null}]}}"#,
            r#"{"prompt_tokens_details":null,"cached_tokens":5,"cache_write_tokens":5}"#,
            r#"{"prompt_tokens_details":{"cached_tokens":{"n":1},"cache_write_tokens":[2]},"completion_tokens":4}"#,
        ];
        for text in cases {
            let value: Value = serde_json::from_str(text).unwrap();
            let want = by_lookups(&value);
            assert_eq!(map_usage(&value), want, "from the Value: {text}");
            let typed: WireUsage = serde_json::from_str(text).unwrap();
            assert_eq!(typed.usage(), want, "from the text: {text}");
        }
        // Anything but an object is no usage at all, in either path.
        for text in ["null", "3", "\"x\"", "[1,2]", "true"] {
            let lenient: Lenient<WireUsage> = serde_json::from_str(text).unwrap();
            assert!(lenient.object().is_none(), "{text}");
        }
        // A repeated key is not guessed at: the chunk goes to the general path.
        assert!(
            serde_json::from_str::<WireUsage>(r#"{"prompt_tokens":1,"prompt_tokens":2}"#).is_err()
        );
    }

    #[test]
    fn error_shapes() {
        let m = |v: Value| stream_error(&v).and_then(|o| o.error_message);
        assert_eq!(
            m(json!({"object": "error", "message": "CUDA out of memory", "code": 500})).as_deref(),
            Some("error in stream: CUDA out of memory")
        );
        assert_eq!(
            m(json!({"error": {"object": "error", "message": "boom", "code": 500}})).as_deref(),
            Some("error in stream: boom")
        );
        assert_eq!(
            m(json!({"error": "plain"})).as_deref(),
            Some("error in stream: plain")
        );
        assert_eq!(
            m(json!({"error": {"code": 1}})).as_deref(),
            Some("error in stream: {\"code\":1}")
        );
        assert_eq!(m(json!({"error": null, "choices": []})), None);
        assert_eq!(m(json!({"object": "chat.completion.chunk"})), None);
    }
}
