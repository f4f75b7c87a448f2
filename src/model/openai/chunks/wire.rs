//! The fast path of the chunk parser: the usual `chat.completion.chunk` parsed straight into
//! typed fields that borrow from the event text (no `serde_json::Value` tree, no copy of a
//! text piece without escapes).
//!
//! It takes only what it understands exactly: a JSON object whose deltas carry no field
//! beyond the known ones, no content array, no error, and fields of the expected types. Any
//! other chunk (or one that does not parse) is left to the general path, which keeps its
//! every rule and error text; so the two paths cannot disagree. It emits the same events in
//! the same order as the general path would.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};

use super::meta::{Lenient, WireUsage};
use super::{ChunkParser, Fed, malformed};
use crate::message::StopReason;
use crate::model::{ModelEvent, ModelOutcome};

/// A string that borrows from the input unless it had escapes.
#[derive(Deserialize)]
#[serde(transparent)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

impl Str<'_> {
    fn get(&self) -> &str {
        &self.0
    }
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(borrow, default)]
    object: Option<Str<'a>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Lenient<WireUsage>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Str<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Delta<'a> {
    #[serde(default)]
    role: Option<IgnoredAny>,
    #[serde(borrow, default)]
    content: Option<Str<'a>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Str<'a>>,
    #[serde(borrow, default)]
    reasoning: Option<Str<'a>>,
    #[serde(borrow, default)]
    refusal: Option<Str<'a>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<CallDelta<'a>>>,
    #[serde(default)]
    function_call: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallDelta<'a> {
    /// A present `index` must be a number (`null` included goes to the general path).
    #[serde(default, deserialize_with = "present_u64")]
    index: Option<u64>,
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(rename = "type", default)]
    kind: Option<IgnoredAny>,
    #[serde(borrow, default)]
    function: Option<Function<'a>>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    arguments: Option<Str<'a>>,
}

fn present_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    u64::deserialize(d).map(Some)
}

fn text<'s>(s: &'s Option<Str<'_>>) -> &'s str {
    s.as_ref().map_or("", Str::get)
}

impl ChunkParser {
    /// Feeds one chunk through the typed fields; `None` when the general path must read it.
    pub(super) fn feed_typed(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Option<Fed> {
        if !data.starts_with('{') {
            return None;
        }
        let chunk: Chunk<'_> = serde_json::from_str(data).ok()?;
        if chunk.error.is_some() || chunk.object.as_ref().is_some_and(|o| o.get() == "error") {
            return None;
        }
        let usage = chunk.usage.object().map(WireUsage::usage);
        let choice = chunk
            .choices
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.index.unwrap_or(0) == 0));
        if let Some(choice) = choice.filter(|_| !self.finished) {
            if let Some(delta) = &choice.delta
                && let Err(e) = self.typed_delta(delta, out)
            {
                return Some(Fed::End(malformed(e.to_string())));
            }
            match &choice.finish_reason {
                Some(r) if r.get() == "error" => {
                    return Some(Fed::End(ModelOutcome::error(
                        StopReason::Failed,
                        "error in stream: the server ended the answer with finish_reason \"error\"",
                    )));
                }
                Some(_) => {
                    if let Err(e) = self.on_finish(out) {
                        return Some(Fed::End(malformed(e.to_string())));
                    }
                }
                None => {}
            }
        }
        if let Some(usage) = usage {
            self.usage = Some(usage);
            self.usage_final = self.finished;
        }
        Some(Fed::More)
    }

    fn typed_delta(
        &mut self,
        delta: &Delta<'_>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), super::ChunkError> {
        let _ = (&delta.role, &delta.function_call);
        let reasoning = [
            (&delta.reasoning_content, "reasoning_content"),
            (&delta.reasoning, "reasoning"),
        ]
        .into_iter()
        .find_map(|(piece, field)| {
            let piece = text(piece);
            (!piece.is_empty()).then_some((piece, field))
        });
        if let Some((piece, field)) = reasoning {
            self.push_thinking(piece, Some(field), out)?;
        }
        if let Some(piece) = &delta.content {
            self.push_text(piece.get(), out)?;
        }
        if let Some(piece) = &delta.refusal {
            self.push_text(piece.get(), out)?;
        }
        for (pos, call) in delta.tool_calls.iter().flatten().enumerate() {
            let _ = &call.kind;
            let index = call
                .index
                .unwrap_or_else(|| u64::try_from(pos).unwrap_or(u64::MAX));
            let (name, fragment) = match &call.function {
                Some(f) => (text(&f.name), text(&f.arguments)),
                None => ("", ""),
            };
            self.tool_call_piece(
                index,
                text(&call.id),
                name,
                fragment,
                std::iter::empty(),
                out,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::model::openai::chunks::CallIds;

    /// Feeds `lines` through the whole parser, or with the fast path's answer replaced by the
    /// general path (so the two can be compared).
    fn events(lines: &[&str], general_only: bool) -> Vec<String> {
        let mut p = ChunkParser::new(Arc::new(Mutex::new(CallIds::default())));
        let mut out = Vec::new();
        let mut log = Vec::new();
        for line in lines {
            let fed = if general_only {
                p.feed_general(line, &mut out)
            } else {
                p.feed(line, &mut out)
            };
            log.extend(out.drain(..).map(|e| format!("{e:?}")));
            log.push(format!("{fed:?}"));
            if matches!(fed, Fed::End(_)) {
                break;
            }
        }
        log
    }

    #[test]
    fn the_fast_path_takes_the_usual_chunks_and_agrees_with_the_general_one() {
        let streams: [&[&str]; 4] = [
            &[
                r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"file_path\":\"a\"}"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1,"audio_tokens":null},"cost":0.5}}"#,
                "[DONE]",
            ],
            &[
                r#"{"choices":[{"delta":{"reasoning_content":"th\u00e9nk"}}]}"#,
                r#"{"choices":[{"index":1,"delta":{"content":"other choice"}},{"index":0,"delta":{"content":"hi \"there\""}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"refusal":"no"},"finish_reason":"stop"}]}"#,
                "[DONE]",
            ],
            // General-path chunks: an extra field, a content array, an error, a null index.
            &[
                r#"{"choices":[{"index":0,"delta":{"content":"a","reasoning_details":[1]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"b"}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":null,"id":"c","function":{"name":"f"}}]}}]}"#,
                r#"{"error":{"message":"boom"}}"#,
            ],
            &[r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"error"}]}"#],
        ];
        for lines in streams {
            assert_eq!(events(lines, false), events(lines, true), "{lines:?}");
        }
        // The usual chunk is taken by the fast path; the others are not.
        let mut p = ChunkParser::new(Arc::new(Mutex::new(CallIds::default())));
        let mut out = Vec::new();
        assert!(p.feed_typed(streams[0][0], &mut out).is_some());
        assert!(p.feed_typed(streams[0][3], &mut out).is_some());
        for line in streams[2] {
            assert!(p.feed_typed(line, &mut out).is_none(), "{line}");
        }
        assert!(p.feed_typed("[1]", &mut out).is_none());
    }
}
