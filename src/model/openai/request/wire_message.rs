//! One message of the OpenAI-compatible `messages` array as a typed value that borrows the
//! history it came from: serializing it writes the bytes the equivalent `serde_json::Value`
//! would (same keys, same order, same escaping), without cloning a tool output or building a
//! map per message. Assistant messages that replay opaque provider fields keep the general
//! map form ([`assistant_value`]), whose merge rules decide key order and overrides.
//!
//! It must not decide which messages a history yields (`history` does) nor send anything.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value, json};

use crate::message::json_bytes;

/// One message of a request body.
#[derive(Debug)]
pub(in crate::model::openai) enum WireMessage<'a> {
    /// `{"role":"system","content":…}`
    System(&'a str),
    /// `{"role":"user","content":…}`: a lone text part is sent as a string.
    User(Vec<Part<'a>>),
    /// An assistant turn without replayed provider fields.
    Assistant(Assistant<'a>),
    /// `{"role":"tool","tool_call_id":…,"content":…}`
    Tool { id: &'a str, content: &'a str },
    /// An assistant turn with replayed provider fields, as [`assistant_value`] builds it.
    Merged(Value),
}

impl WireMessage<'_> {
    /// About the length of the message's JSON: its texts (escaping adds little to common
    /// text) and room for its keys.
    pub(in crate::model::openai) fn likely_len(&self) -> usize {
        let text = match self {
            WireMessage::System(content) => content.len(),
            WireMessage::User(parts) => parts
                .iter()
                .map(|part| match part {
                    Part::Text(text) | Part::ImageUrl(text) => text.len() + 32,
                })
                .sum(),
            WireMessage::Assistant(assistant) => {
                let calls: usize = assistant
                    .calls
                    .iter()
                    .map(|call| call.id.len() + call.name.len() + call.arguments.len() + 64)
                    .sum();
                let reasoning = assistant.reasoning.as_ref().map_or(0, |(_, r)| r.len());
                assistant.text.len() + reasoning + calls
            }
            WireMessage::Tool { id, content } => id.len() + content.len(),
            WireMessage::Merged(_) => 0,
        };
        text + text / 16 + 64
    }
}

/// One part of a user message's content.
#[derive(Debug)]
pub(in crate::model::openai) enum Part<'a> {
    /// `{"type":"text","text":…}`
    Text(Cow<'a, str>),
    /// `{"type":"image_url","image_url":{"url":…}}`
    ImageUrl(Cow<'a, str>),
}

/// An assistant message: its text, its tool calls and the reasoning to send back.
#[derive(Debug, Default)]
pub(in crate::model::openai) struct Assistant<'a> {
    pub(super) text: Cow<'a, str>,
    pub(super) calls: Vec<Call<'a>>,
    /// The body field the provider streamed its reasoning in, and that reasoning.
    pub(super) reasoning: Option<(&'a str, Cow<'a, str>)>,
}

/// `{"id":…,"type":"function","function":{"name":…,"arguments":…}}`
#[derive(Debug)]
pub(super) struct Call<'a> {
    pub(super) id: &'a str,
    pub(super) name: &'a str,
    pub(super) arguments: &'a str,
}

/// Keys the assistant message sets itself: a reasoning field of one of these names needs the
/// general form, where it overrides the value in place.
const ASSISTANT_KEYS: [&str; 3] = ["role", "content", "tool_calls"];

impl Assistant<'_> {
    /// Whether the typed form writes what [`assistant_value`] would without extras.
    pub(super) fn is_plain(&self) -> bool {
        self.reasoning
            .as_ref()
            .is_none_or(|(field, _)| !ASSISTANT_KEYS.contains(field))
    }

    fn content(&self) -> Option<&str> {
        if !self.text.is_empty() {
            Some(&self.text)
        } else if self.calls.is_empty() {
            Some("")
        } else {
            None
        }
    }
}

/// The general assistant message: `role`, `content`, `tool_calls` (each call followed by its
/// replayed fields that do not collide), the reasoning field (overriding a same-named key in
/// place), then the replayed message fields that do not collide.
pub(super) fn assistant_value(
    assistant: &Assistant<'_>,
    call_extras: &[Option<&Map<String, Value>>],
    extra: Map<String, Value>,
) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert(
        "content".into(),
        assistant.content().map_or(Value::Null, |c| json!(c)),
    );
    if !assistant.calls.is_empty() {
        let calls = assistant
            .calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                let mut value = Map::new();
                value.insert("id".into(), json!(call.id));
                value.insert("type".into(), json!("function"));
                value.insert(
                    "function".into(),
                    json!({"name": call.name, "arguments": call.arguments}),
                );
                if let Some(extra) = call_extras.get(i).copied().flatten() {
                    for (key, v) in extra {
                        value.entry(key.clone()).or_insert_with(|| v.clone());
                    }
                }
                Value::Object(value)
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some((field, thinking)) = &assistant.reasoning {
        message.insert((*field).to_string(), json!(thinking));
    }
    for (key, value) in extra {
        message.entry(key).or_insert(value);
    }
    Value::Object(message)
}

impl Serialize for WireMessage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            WireMessage::Merged(value) => value.serialize(serializer),
            WireMessage::System(content) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("role", "system")?;
                map.serialize_entry("content", content)?;
                map.end()
            }
            WireMessage::Tool { id, content } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", id)?;
                map.serialize_entry("content", content)?;
                map.end()
            }
            WireMessage::User(parts) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("role", "user")?;
                match parts.as_slice() {
                    [Part::Text(text)] => map.serialize_entry("content", text)?,
                    parts => map.serialize_entry("content", &Parts(parts))?,
                }
                map.end()
            }
            WireMessage::Assistant(assistant) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("role", "assistant")?;
                map.serialize_entry("content", &assistant.content())?;
                if !assistant.calls.is_empty() {
                    map.serialize_entry("tool_calls", &assistant.calls)?;
                }
                if let Some((field, thinking)) = &assistant.reasoning {
                    map.serialize_entry(field, thinking)?;
                }
                map.end()
            }
        }
    }
}

impl WireMessage<'_> {
    /// Appends the message's JSON, the bytes [`Serialize`] writes: the common kinds with the
    /// SIMD string escaper ([`json_bytes::write_str`]), a replayed (`Merged`) message and a
    /// user message of several parts through serde_json.
    pub(in crate::model::openai) fn write_json(
        &self,
        out: &mut Vec<u8>,
    ) -> Result<(), serde_json::Error> {
        match self {
            WireMessage::System(content) => {
                out.extend_from_slice(b"{\"role\":\"system\",\"content\":");
                json_bytes::write_str(out, content);
            }
            WireMessage::Tool { id, content } => {
                out.extend_from_slice(b"{\"role\":\"tool\",\"tool_call_id\":");
                json_bytes::write_str(out, id);
                out.extend_from_slice(b",\"content\":");
                json_bytes::write_str(out, content);
            }
            WireMessage::User(parts) => match parts.as_slice() {
                [Part::Text(text)] => {
                    out.extend_from_slice(b"{\"role\":\"user\",\"content\":");
                    json_bytes::write_str(out, text);
                }
                _ => return serde_json::to_writer(out, self),
            },
            WireMessage::Assistant(assistant) => {
                out.extend_from_slice(b"{\"role\":\"assistant\",\"content\":");
                match assistant.content() {
                    Some(content) => json_bytes::write_str(out, content),
                    None => out.extend_from_slice(b"null"),
                }
                if !assistant.calls.is_empty() {
                    out.extend_from_slice(b",\"tool_calls\":[");
                    for (i, call) in assistant.calls.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(b"{\"id\":");
                        json_bytes::write_str(out, call.id);
                        out.extend_from_slice(b",\"type\":\"function\",\"function\":{\"name\":");
                        json_bytes::write_str(out, call.name);
                        out.extend_from_slice(b",\"arguments\":");
                        json_bytes::write_str(out, call.arguments);
                        out.extend_from_slice(b"}}");
                    }
                    out.push(b']');
                }
                if let Some((field, thinking)) = &assistant.reasoning {
                    out.push(b',');
                    json_bytes::write_str(out, field);
                    out.push(b':');
                    json_bytes::write_str(out, thinking);
                }
            }
            WireMessage::Merged(value) => return serde_json::to_writer(out, value),
        }
        out.push(b'}');
        Ok(())
    }
}

struct Parts<'p, 'a>(&'p [Part<'a>]);

impl Serialize for Parts<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for part in self.0 {
            seq.serialize_element(part)?;
        }
        seq.end()
    }
}

impl Serialize for Part<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        match self {
            Part::Text(text) => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
            }
            Part::ImageUrl(url) => {
                map.serialize_entry("type", "image_url")?;
                map.serialize_entry("image_url", &Url(url))?;
            }
        }
        map.end()
    }
}

struct Url<'u>(&'u str);

impl Serialize for Url<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("url", self.0)?;
        map.end()
    }
}

impl Serialize for Call<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("id", self.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry(
            "function",
            &Function {
                name: self.name,
                arguments: self.arguments,
            },
        )?;
        map.end()
    }
}

#[derive(serde::Serialize)]
struct Function<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap()
    }

    fn call<'a>(id: &'a str, arguments: &'a str) -> Call<'a> {
        Call {
            id,
            name: "read_file",
            arguments,
        }
    }

    #[test]
    fn write_json_writes_the_bytes_serialize_does() {
        let texts: Vec<String> = vec![
            String::new(),
            "said \"so\"\n\\ \u{1}\u{1f}\u{7f} ünï 🦀".into(),
            "     1\tline 1: the quick brown fox jumps over the lazy dog\n".repeat(20),
            (0u8..0x80).map(char::from).collect::<String>().repeat(3),
        ];
        for t in &texts {
            let messages = [
                WireMessage::System(t),
                WireMessage::Tool { id: t, content: t },
                WireMessage::User(vec![Part::Text(t.as_str().into())]),
                WireMessage::User(vec![
                    Part::Text(t.as_str().into()),
                    Part::ImageUrl("data:image/png;base64,AA==".into()),
                ]),
                WireMessage::User(Vec::new()),
                WireMessage::Assistant(Assistant {
                    text: t.as_str().into(),
                    ..Assistant::default()
                }),
                WireMessage::Assistant(Assistant::default()),
                WireMessage::Assistant(Assistant {
                    calls: vec![call(t, t), call("b", "{}")],
                    reasoning: Some(("reasoning_content", t.as_str().into())),
                    ..Assistant::default()
                }),
                WireMessage::Assistant(Assistant {
                    text: "and".into(),
                    calls: vec![call("a", t)],
                    reasoning: Some(("reasoning\"odd", "".into())),
                }),
                WireMessage::Merged(json!({"role": "assistant", "content": t, "x": [1, null]})),
            ];
            for message in messages {
                let mut fast = b"[".to_vec();
                message.write_json(&mut fast).unwrap();
                assert_eq!(
                    String::from_utf8(fast).unwrap(),
                    format!("[{}", bytes(&message)),
                    "{message:?}"
                );
            }
        }
    }

    #[test]
    fn plain_assistant_messages_write_what_the_general_form_does() {
        let cases = [
            Assistant::default(),
            Assistant {
                text: "said \"so\"\n".into(),
                ..Assistant::default()
            },
            Assistant {
                calls: vec![call("a", "{\"path\":\"x\"}"), call("b", "{}")],
                ..Assistant::default()
            },
            Assistant {
                text: "and".into(),
                calls: vec![call("a", "{}")],
                reasoning: Some(("reasoning_content", "think\u{1}ing".into())),
            },
            Assistant {
                calls: vec![call("c", "")],
                reasoning: Some(("reasoning", "".into())),
                ..Assistant::default()
            },
        ];
        for assistant in cases {
            assert!(assistant.is_plain());
            let general = assistant_value(&assistant, &[], Map::new());
            assert_eq!(bytes(&WireMessage::Assistant(assistant)), bytes(&general));
        }
    }

    #[test]
    fn a_reasoning_field_named_like_a_key_needs_the_general_form() {
        let assistant = Assistant {
            text: "t".into(),
            reasoning: Some(("content", "r".into())),
            ..Assistant::default()
        };
        assert!(!assistant.is_plain());
        let general = assistant_value(&assistant, &[], Map::new());
        assert_eq!(bytes(&general), r#"{"role":"assistant","content":"r"}"#);
    }

    #[test]
    fn replayed_fields_follow_and_never_override() {
        let call_extra = json!({"id": "no", "extra_content": {"sig": "s"}});
        let assistant = Assistant {
            calls: vec![call("a", "{}")],
            ..Assistant::default()
        };
        let extra = json!({"role": "no", "vendor": 1});
        let Value::Object(extra) = extra else {
            unreachable!()
        };
        let value = assistant_value(&assistant, &[call_extra.as_object()], extra);
        assert_eq!(
            bytes(&value),
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"read_file","arguments":"{}"},"extra_content":{"sig":"s"}}],"vendor":1}"#
        );
    }

    #[test]
    fn user_system_and_tool_messages_write_their_value_forms() {
        let lone = WireMessage::User(vec![Part::Text("hi \"you\"".into())]);
        assert_eq!(
            bytes(&lone),
            bytes(&json!({"role": "user", "content": "hi \"you\""}))
        );
        let parts = WireMessage::User(vec![
            Part::Text("look".into()),
            Part::ImageUrl("data:image/png;base64,AA==".into()),
        ]);
        assert_eq!(
            bytes(&parts),
            bytes(&json!({"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
            ]}))
        );
        assert_eq!(
            bytes(&WireMessage::System("be\tbrief")),
            bytes(&json!({"role": "system", "content": "be\tbrief"}))
        );
        let tool = WireMessage::Tool {
            id: "call_1",
            content: "line\u{7f}\n\"q\"\\",
        };
        assert_eq!(
            bytes(&tool),
            bytes(
                &json!({"role": "tool", "tool_call_id": "call_1", "content": "line\u{7f}\n\"q\"\\"})
            )
        );
    }
}
