//! The chunks that are not content: token usage (every server's spelling of cache reads and
//! cache writes) and errors reported inside a 200 stream (`{"error": …}` and vLLM's bare
//! `{"object":"error", …}`). Pure functions of one chunk; no state, no events.

use serde_json::Value;

use super::clip;
use crate::message::{StopReason, Usage};
use crate::model::ModelOutcome;

/// Longest server error text kept from a stream.
const STREAM_ERROR_MAX: usize = 500;

/// The first unsigned number among `paths` (each a key path into `usage`).
fn first(usage: &Value, paths: &[&[&str]]) -> Option<u64> {
    paths.iter().find_map(|path| {
        path.iter()
            .try_fold(usage, |v, key| v.get(key))
            .and_then(Value::as_u64)
    })
}

/// A `usage` object as Rookery's [`Usage`]. Cache reads: `prompt_tokens_details.cached_tokens`
/// (OpenAI), `prompt_cache_hit_tokens` (DeepSeek), `cache_read_input_tokens` (LiteLLM);
/// cache writes: `prompt_tokens_details.cache_write_tokens` (OpenRouter),
/// `cache_creation_input_tokens` (LiteLLM, Anthropic-style gateways),
/// `prompt_tokens_details.cache_creation_tokens`.
pub(super) fn map_usage(usage: &Value) -> Usage {
    let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let prompt = n("prompt_tokens");
    let output = n("completion_tokens");
    let total = usage
        .get("total_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(prompt.saturating_add(output));
    let cache_read = first(
        usage,
        &[
            &["prompt_tokens_details", "cached_tokens"],
            &["prompt_cache_hit_tokens"],
            &["cache_read_input_tokens"],
        ],
    )
    .unwrap_or(0);
    let cache_write = first(
        usage,
        &[
            &["prompt_tokens_details", "cache_write_tokens"],
            &["prompt_tokens_details", "cache_creation_tokens"],
            &["prompt_tokens_details", "cache_creation_input_tokens"],
            &["cache_creation_input_tokens"],
        ],
    )
    .unwrap_or(0);
    Usage {
        cache_read,
        cache_write,
        output,
        total,
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
