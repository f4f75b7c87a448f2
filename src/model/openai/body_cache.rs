//! The request body of one session assembled from cached serialized pieces: the head
//! (`{"model":…,"messages":[`) once, the tail (stream options, extra fields, the tool list)
//! from the model's [`SharedTails`], and each history message serialized once, when it first
//! appears in a body. A request then serializes only the messages that are new since the last
//! one (the last assistant turn and its tool outputs), instead of the whole conversation; the
//! last body's open messages (those a later payload could still change) are kept as bytes too
//! and reused when the new history proves them unchanged (see [`BodyCache::reusable`]).
//!
//! The bytes are exactly those of [`request::encode_body`] (tested below). The cache trusts
//! nothing: a history that does not start with the payloads its pieces came from (or another
//! system prompt) rebuilds it. It keeps no reference to the history, only a keyed hash of the
//! payloads its kept messages came from, so the session appends to its history in place
//! instead of copying all of it while a cache still holds the previous request's. The hash is
//! foldhash's, seeded at random per cache (no input collides for every seed, and the value
//! never leaves the process); it runs over the kept prefix once per request, several times
//! faster than SipHash, which cost 8 % of the HTTP path's instructions.
//!
//! The history is put through the image window first (`image_window.rs`): past
//! [`MAX_REQUEST_IMAGES`] tool-output images, the pieces come from the trimmed copy, as
//! [`request::encode_body`]'s do. Each image then rewrites an older output, which the prefix
//! check sees, so such a session rebuilds its pieces instead of reusing them.
//!
//! It never sends anything and never sees the API key.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use foldhash::quality::{FoldHasher, RandomState};
use serde_json::Value;

use super::request::{self, WireMessage};
use super::shared_tails::SharedTails;
use crate::message::ModelPayload;
use crate::model::ModelRequest;
use crate::model::image_window::{MAX_REQUEST_IMAGES, windowed};

/// The cached pieces of one session's bodies.
#[derive(Debug, Default)]
pub(super) struct BodyCache {
    /// `{"model":<name>,"messages":[` (the model name never changes in a session).
    head: Vec<u8>,
    /// `],"stream":true,…,"tools":…}` for the tool list `tail_tools` (shared by the sessions
    /// of the model, see `shared_tails.rs`).
    tail: Bytes,
    tail_tools: Option<Arc<Vec<Value>>>,
    /// The system prompt the messages below came from.
    system: Option<Arc<str>>,
    /// What `history[..=restart]` of the last request hashed to (`None` when that history was
    /// shorter), with `keys`: the check that a new request still starts with those payloads.
    prefix: Option<u64>,
    keys: RandomState,
    /// The serialized final messages, one allocation of exactly its size each (a growing
    /// buffer would hold up to twice the conversation).
    messages: Vec<Box<[u8]>>,
    /// A fresh build resumes at this payload; `history[..=restart]` must be unchanged.
    restart: usize,
    /// The last body's messages after the final ones, as a fresh build from `restart` emitted
    /// them for `history[..open_end]` (see [`BodyCache::reusable`]).
    open: Vec<Box<[u8]>>,
    open_end: usize,
    /// How many of `open` were emitted before the build's final flush.
    open_stable: usize,
    /// The final flush emitted what a restart point at `history[open_end]` would.
    open_flush_is_restart: bool,
    /// What `history[open_from..open_end]` hashed to: with the prefix check, the proof that
    /// the payloads `open` came from are unchanged.
    open_from: usize,
    open_hash: u64,
    /// Messages serialized so far (tests check each is serialized once).
    #[cfg(test)]
    serializations: usize,
}

impl BodyCache {
    /// The serialized body of `request`; the pieces it adds are kept for the next one.
    ///
    /// The body is one allocation of exactly its length, which the session does not keep: it
    /// is freed once the request has been written, so a session waiting for its answer holds
    /// no body (a kept, growing buffer cost more than the body itself per idle session).
    pub(super) fn encode(
        &mut self,
        model: &str,
        request: &ModelRequest,
        vision: bool,
        tails: &SharedTails,
    ) -> Bytes {
        if self.head.is_empty() {
            self.head = format!("{{\"model\":{},\"messages\":[", json_text(&model)).into_bytes();
        }
        let tools_same = self
            .tail_tools
            .as_ref()
            .is_some_and(|t| Arc::ptr_eq(t, &request.tools));
        if !tools_same {
            self.tail = tails.get(&request.tools);
            self.tail_tools = Some(request.tools.clone());
        }
        // Only the most recent images are sent: the pieces are those of the trimmed copy.
        let trimmed = windowed(&request.history, MAX_REQUEST_IMAGES);
        let history = trimmed.as_deref().unwrap_or(request.history.as_slice());
        // `hasher` is fed with `history[..hashed]` by the check, and then up to the new
        // restart point, so each request hashes its history's kept prefix once.
        let mut hasher = self.keys.build_hasher();
        let mut hashed = 0;
        if !self.still_valid(request, history, &mut hasher, &mut hashed) {
            self.reset(request);
            hasher = self.keys.build_hasher();
            hashed = 0;
        }
        let fresh = request::messages_from(history, self.restart, vision, self.open_end);
        let reusable = self.reusable(history, &fresh);
        // Messages before the new restart point are final: keep them serialized.
        let keep = match fresh.restart {
            Some((at, n)) if at >= self.restart => {
                self.restart = at;
                n
            }
            _ => 0,
        };
        let mut old = std::mem::take(&mut self.open).into_iter();
        for (i, message) in fresh.messages.iter().enumerate() {
            let piece = match old.next().filter(|_| i < reusable) {
                Some(piece) => piece,
                None => self.serialized(message),
            };
            if i < keep {
                self.messages.push(piece);
            } else {
                self.open.push(piece);
            }
        }
        let checked = self.restart + 1;
        self.prefix = (history.len() >= checked).then(|| {
            for payload in &history[hashed.min(checked)..checked] {
                payload.hash(&mut hasher);
            }
            hasher.finish()
        });
        self.open_end = history.len();
        self.open_stable = fresh.before_flush.saturating_sub(keep);
        self.open_flush_is_restart = fresh.flush_is_restart;
        // `still_valid` checks the prefix unless nothing is kept yet.
        self.open_from = if self.messages.is_empty() && self.restart == 0 {
            0
        } else {
            checked
        };
        self.open_hash = self.hash_of(history.get(self.open_from..).unwrap_or_default());

        let pieces = self.messages.len() + self.open.len();
        let len = self.head.len()
            + self
                .messages
                .iter()
                .chain(&self.open)
                .map(|m| m.len())
                .sum::<usize>()
            + pieces.saturating_sub(1)
            + self.tail.len();
        let mut body = BytesMut::with_capacity(len);
        body.extend_from_slice(&self.head);
        for (i, message) in self.messages.iter().chain(&self.open).enumerate() {
            if i > 0 {
                body.put_u8(b',');
            }
            body.extend_from_slice(message);
        }
        body.extend_from_slice(&self.tail);
        body.freeze()
    }

    /// How many of `fresh`'s messages are the last body's `open` ones, byte for byte. The
    /// build started at the same restart point, so if `history[..open_end]` is unchanged the
    /// messages emitted before that build's final flush come again; the flushed ones come
    /// again too when a restart point follows at `history[open_end]` (the same flush, in the
    /// same order), or when the history did not grow (the same build).
    fn reusable(&self, history: &[ModelPayload], fresh: &request::Fresh<'_>) -> usize {
        let end = self.open_end;
        if self.open.is_empty()
            || history.len() < end
            || self.hash_of(history.get(self.open_from..end).unwrap_or_default()) != self.open_hash
        {
            return 0;
        }
        let all = self.open.len();
        let again = history.len() == end && fresh.messages.len() == all;
        if again || (self.open_flush_is_restart && fresh.watched == Some(all)) {
            all
        } else {
            self.open_stable.min(all)
        }
    }

    fn hash_of(&self, payloads: &[ModelPayload]) -> u64 {
        self.keys.hash_one(payloads)
    }

    /// One message's JSON in an allocation of exactly its size.
    fn serialized(&mut self, message: &WireMessage<'_>) -> Box<[u8]> {
        #[cfg(test)]
        {
            self.serializations += 1;
        }
        serialized(message)
    }

    /// The cached messages still describe the start of `request`, whose (windowed) history
    /// is `new`. Feeds `hasher` with the payloads it checked and says how many in `hashed`.
    fn still_valid(
        &self,
        request: &ModelRequest,
        new: &[ModelPayload],
        hasher: &mut FoldHasher<'static>,
        hashed: &mut usize,
    ) -> bool {
        let Some(system) = &self.system else {
            return false;
        };
        if system.as_ref() != request.system_prompt.as_ref() {
            return false;
        }
        if self.messages.is_empty() && self.restart == 0 {
            return true;
        }
        let checked = self.restart + 1;
        let Some(prefix) = self.prefix else {
            return false;
        };
        if new.len() < checked {
            return false;
        }
        for payload in &new[..checked] {
            payload.hash(hasher);
        }
        *hashed = checked;
        hasher.finish() == prefix
    }

    fn reset(&mut self, request: &ModelRequest) {
        self.messages.clear();
        self.open.clear();
        self.open_end = 0;
        self.restart = 0;
        self.prefix = None;
        self.system = Some(request.system_prompt.clone());
        if !request.system_prompt.is_empty() {
            let system = request::system_message(&request.system_prompt);
            let piece = self.serialized(&system);
            self.messages.push(piece);
        }
    }
}

/// One message's JSON in an allocation of exactly its size.
fn serialized(message: &WireMessage<'_>) -> Box<[u8]> {
    let mut out = Vec::with_capacity(message.likely_len());
    write_message(&mut out, message);
    out.into_boxed_slice()
}

fn write_message(out: &mut Vec<u8>, message: &WireMessage<'_>) {
    let start = out.len();
    if message.write_json(out).is_err() {
        out.truncate(start);
        out.extend_from_slice(b"null");
    }
}

fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::message::{ModelPayload, Role, StopReason};

    fn text(role: Role, t: &str) -> ModelPayload {
        ModelPayload::Text {
            role,
            text: t.into(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }
    }

    fn call(id: &str) -> ModelPayload {
        ModelPayload::ToolCall {
            role: Role::Assistant,
            name: "read_file".into(),
            arguments: r#"{"file_path":"bench-input.txt"}"#.into(),
            tool_call_id: id.into(),
            stop_reason: StopReason::Completed,
            fidelity: None,
        }
    }

    fn output(id: &str, t: &str) -> ModelPayload {
        ModelPayload::ToolCallOutput {
            role: Role::User,
            output: t.into(),
            images: vec!["data:image/png;base64,AAA".into()],
            tool_call_id: id.into(),
            stop_reason: StopReason::Completed,
        }
    }

    fn thinking() -> ModelPayload {
        ModelPayload::Thinking {
            role: Role::Assistant,
            thinking: "plan \"quoted\" ü".into(),
            stop_reason: StopReason::Completed,
            fidelity: json!({"reasoning_field": "reasoning_content"})
                .as_object()
                .cloned(),
        }
    }

    /// Every request of a growing conversation, plus rewritten ones, byte for byte.
    #[test]
    fn bodies_equal_the_whole_serialization() {
        let tools = Arc::new(vec![
            json!({"name": "read_file", "description": "d", "parameters": {"type": "object"}}),
        ]);
        let tools_json = request::tools_json(&tools);
        let extra = json!({"temperature": 0.2, "model": "ignored", "top_p": {"x": [1]}});
        let extra = extra.as_object().cloned().unwrap_or_default();
        let steps: Vec<ModelPayload> = vec![
            text(Role::User, "go"),
            thinking(),
            text(Role::Assistant, "reading"),
            call("a"),
            call("b"),
            output("b", "B"),
            output("a", "A"),
            call("c"),
            output("c", "C"),
            output("zz", "stray"),
            text(Role::User, "more"),
            ModelPayload::ImageUrl {
                role: Role::User,
                image_url: "https://x/y.png".into(),
                stop_reason: StopReason::Completed,
            },
            call("d#2"),
            output("d#2", "D"),
            call("e"),
            // After a group whose images are pending: a restart point that flushes the user
            // parts before the group, unlike the end of a build.
            output("yy", "unmatched"),
            text(Role::Assistant, "done"),
        ];
        let tails = SharedTails::new(extra.clone());
        for vision in [false, true] {
            for system in ["", "sys \"prompt\""] {
                let mut cache = BodyCache::default();
                let mut history = Vec::new();
                let mut requests = 0;
                for step in &steps {
                    history.push(step.clone());
                    for tools in [tools.clone(), Arc::new(Vec::new())] {
                        let request = ModelRequest {
                            system_prompt: Arc::from(system),
                            history: Arc::new(history.clone()),
                            tools: tools.clone(),
                        };
                        let json = if tools.is_empty() { "[]" } else { &tools_json };
                        let want = request::encode_body("m\u{e9}", &request, vision, &extra, json);
                        let got = cache.encode("m\u{e9}", &request, vision, &tails);
                        assert_eq!(
                            String::from_utf8_lossy(&got),
                            String::from_utf8_lossy(&want),
                            "step {requests} vision {vision} system {system:?}"
                        );
                        requests += 1;
                    }
                }
                // The pieces were kept: most messages are cached at the end.
                assert!(cache.messages.len() > 5, "{}", cache.messages.len());
                // A rewritten history (e.g. compacted) is rebuilt, not patched.
                let mut rewritten = history.clone();
                rewritten[0] = text(Role::User, "changed");
                rewritten.remove(3);
                let request = ModelRequest {
                    system_prompt: Arc::from(system),
                    history: Arc::new(rewritten),
                    tools: tools.clone(),
                };
                let want = request::encode_body("m\u{e9}", &request, vision, &extra, &tools_json);
                let got = cache.encode("m\u{e9}", &request, vision, &tails);
                assert_eq!(got, want);
                // Another system prompt too.
                let request = ModelRequest {
                    system_prompt: Arc::from("other"),
                    ..request
                };
                let want = request::encode_body("m\u{e9}", &request, vision, &extra, &tools_json);
                assert_eq!(cache.encode("m\u{e9}", &request, vision, &tails), want);
                // A shorter history than the cached one.
                let request = ModelRequest {
                    history: Arc::new(history[..2].to_vec()),
                    ..request
                };
                let want = request::encode_body("m\u{e9}", &request, vision, &extra, &tools_json);
                assert_eq!(cache.encode("m\u{e9}", &request, vision, &tails), want);
            }
        }
    }

    /// The cache holds no reference to the history, so the session's next append does not
    /// copy it; a history changed in place (the same allocation) is still seen.
    #[test]
    fn the_history_is_not_held_and_an_in_place_change_is_seen() {
        let mut cache = BodyCache::default();
        let tails = SharedTails::new(Map::new());
        let tools = Arc::new(Vec::new());
        let mut request = ModelRequest {
            system_prompt: Arc::from("s"),
            history: Arc::new(vec![
                text(Role::User, "go"),
                call("a"),
                output("a", "A"),
                call("b"),
                output("b", "B"),
            ]),
            tools,
        };
        let want = request::encode_body("m", &request, false, &Map::new(), "[]");
        assert_eq!(cache.encode("m", &request, false, &tails), want);
        assert_eq!(Arc::strong_count(&request.history), 1);
        assert!(cache.messages.len() > 1, "{}", cache.messages.len());
        let before = Arc::as_ptr(&request.history);
        // A rewrite of a kept payload, in place.
        Arc::make_mut(&mut request.history)[2] = output("a", "rewritten");
        assert_eq!(Arc::as_ptr(&request.history), before);
        let want = request::encode_body("m", &request, false, &Map::new(), "[]");
        assert_eq!(
            String::from_utf8_lossy(&cache.encode("m", &request, false, &tails)),
            String::from_utf8_lossy(&want)
        );
        // A rewrite of the open turn's output (not kept yet, but its bytes are), in place.
        Arc::make_mut(&mut request.history)[4] = output("b", "rewritten too");
        let want = request::encode_body("m", &request, false, &Map::new(), "[]");
        assert_eq!(
            String::from_utf8_lossy(&cache.encode("m", &request, false, &tails)),
            String::from_utf8_lossy(&want)
        );
        // An append, in place.
        Arc::make_mut(&mut request.history).push(text(Role::User, "more"));
        let want = request::encode_body("m", &request, false, &Map::new(), "[]");
        assert_eq!(cache.encode("m", &request, false, &tails), want);
        // The same request again: the same bytes.
        assert_eq!(cache.encode("m", &request, false, &tails), want);
    }

    /// Past the image window, each body is the windowed one (as `encode_body` makes it),
    /// also when the cache was built from bodies that were not windowed.
    #[test]
    fn bodies_past_the_image_window_are_windowed() {
        let mut cache = BodyCache::default();
        let tails = SharedTails::new(Map::new());
        let mut history = vec![text(Role::User, "look")];
        let tools = Arc::new(Vec::new());
        for t in 0..MAX_REQUEST_IMAGES + 3 {
            history.push(call(&format!("call_{t}")));
            history.push(output(&format!("call_{t}"), "out"));
            let request = ModelRequest {
                system_prompt: Arc::from("s"),
                history: Arc::new(history.clone()),
                tools: tools.clone(),
            };
            let want = request::encode_body("m", &request, true, &Map::new(), "[]");
            let got = cache.encode("m", &request, true, &tails);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
            let images = String::from_utf8_lossy(&got).matches("data:image/").count();
            assert_eq!(images, (t + 1).min(MAX_REQUEST_IMAGES), "turn {t}");
        }
    }

    /// The standard bench conversation serializes each message once.
    #[test]
    fn a_tool_loop_keeps_all_but_the_last_turn() {
        let mut cache = BodyCache::default();
        let tails = SharedTails::new(Map::new());
        let mut history = vec![text(Role::User, "Run the benchmark task.")];
        let tools = Arc::new(Vec::new());
        for t in 0..10 {
            let request = ModelRequest {
                system_prompt: Arc::from("s"),
                history: Arc::new(history.clone()),
                tools: tools.clone(),
            };
            let want = request::encode_body("m", &request, false, &Map::new(), "[]");
            assert_eq!(cache.encode("m", &request, false, &tails), want);
            // system + user + the finished turns; the open turn is not kept yet.
            assert_eq!(cache.messages.len(), if t == 0 { 1 } else { 2 * t });
            history.push(call(&format!("call_{t}")));
            history.push(output(&format!("call_{t}"), "out"));
        }
        // Each message was serialized once: when it first appeared, still open.
        assert_eq!(
            cache.serializations,
            cache.messages.len() + cache.open.len()
        );
    }
}
