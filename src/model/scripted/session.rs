//! One session's play of a script: the cursor over its turns (with `repeat`), the tool call
//! counter (`call_<n>` across requests), and the events of one request (partials, completes,
//! usage, end; or an error end), delayed by `delay_ms` inside the stream.
//!
//! It must not parse scripts (that is `scripted.rs`) nor know about actors or traces.

use std::sync::Arc;
use std::time::Duration;

use super::{SCRIPT_FINISHED, Script, Turn, placeholder};
use crate::message::{ModelPayload, Role, StopReason, Usage};
use crate::model::{ModelEvent, ModelOutcome, ModelRequest, ModelSession};
use futures::StreamExt;
use futures::stream::{self, BoxStream};

/// Which turns of the script a session plays.
#[derive(Debug, Clone, Copy)]
pub(super) enum TurnSource {
    Root,
    Child(usize),
    None,
}

/// One session's cursor over its turns and its tool call counter.
pub(super) struct ScriptedSession {
    script: Arc<Script>,
    source: TurnSource,
    /// Index of the current turn.
    turn: usize,
    /// How many times the current turn has been used.
    used: u32,
    next_call: u64,
}

impl ScriptedSession {
    pub(super) fn new(script: Arc<Script>, source: TurnSource, next_call: u64) -> Self {
        ScriptedSession {
            script,
            source,
            turn: 0,
            used: 0,
            next_call,
        }
    }

    /// Moves the cursor past `requests` turns already played (a resumed session).
    pub(super) fn skip(&mut self, requests: u64) {
        for _ in 0..requests {
            if self.next_turn().is_none() {
                return;
            }
        }
    }

    fn turns(&self) -> &[Turn] {
        match self.source {
            TurnSource::Root => &self.script.turns,
            TurnSource::Child(i) => self.script.children.get(i).map_or(&[], |c| &c.turns),
            TurnSource::None => &[],
        }
    }

    /// Takes the next turn (a `repeat: n` turn n times), or `None` once the script is used up.
    fn next_turn(&mut self) -> Option<Turn> {
        loop {
            let turn = self.turns().get(self.turn)?.clone();
            if self.used < turn.repeat {
                self.used += 1;
                return Some(turn);
            }
            self.turn += 1;
            self.used = 0;
        }
    }
}

impl ModelSession for ScriptedSession {
    fn stream(&mut self, request: ModelRequest) -> BoxStream<'static, ModelEvent> {
        let turn = self.next_turn().unwrap_or_else(|| Turn {
            text: Some(SCRIPT_FINISHED.to_string()),
            ..Turn::default()
        });
        let delay = Duration::from_millis(turn.delay_ms);
        let events = match turn.error {
            Some(error) => {
                let status = error.status();
                vec![ModelEvent::End(ModelOutcome::error(
                    status,
                    format!("scripted {status} error"),
                ))]
            }
            None => self.answer(&turn, &request),
        };
        if delay.is_zero() {
            stream::iter(events).boxed()
        } else {
            stream::once(async move {
                tokio::time::sleep(delay).await;
                stream::iter(events)
            })
            .flatten()
            .boxed()
        }
    }
}

impl ScriptedSession {
    /// The events of a completed turn: thinking, text, each tool call (each a `start`, `delta`,
    /// `stop` partial then the complete message), then usage and the completed end.
    fn answer(&mut self, turn: &Turn, request: &ModelRequest) -> Vec<ModelEvent> {
        let mut events = Vec::new();
        let mut produced = 0usize;
        if let Some(thinking) = &turn.thinking {
            produced += thinking.chars().count();
            let complete = ModelPayload::Thinking {
                role: Role::Assistant,
                thinking: thinking.clone(),
                stop_reason: StopReason::Completed,
                fidelity: None,
            };
            crate::model::push_segment(&mut events, thinking, complete, |event_type, thinking| {
                ModelPayload::PartialThinking {
                    role: Role::Assistant,
                    event_type,
                    thinking,
                    stop_reason: StopReason::Completed,
                }
            });
        }
        if let Some(text) = &turn.text {
            produced += text.chars().count();
            let complete = ModelPayload::Text {
                role: Role::Assistant,
                text: text.clone(),
                sender: None,
                stop_reason: StopReason::Completed,
                fidelity: None,
            };
            crate::model::push_segment(&mut events, text, complete, |event_type, text| {
                ModelPayload::PartialText {
                    role: Role::Assistant,
                    event_type,
                    text,
                    stop_reason: StopReason::Completed,
                }
            });
        }
        let outputs: Vec<&str> = request
            .history
            .iter()
            .filter_map(|m| match m {
                ModelPayload::ToolCallOutput { output, .. } => Some(output.as_str()),
                _ => None,
            })
            .collect();
        for call in &turn.tool_calls {
            let arguments = placeholder::render_arguments(&call.arguments, &outputs);
            produced += arguments.chars().count();
            let tool_call_id = format!("call_{}", self.next_call);
            self.next_call += 1;
            let complete = ModelPayload::ToolCall {
                role: Role::Assistant,
                name: call.name.clone(),
                arguments: arguments.clone(),
                tool_call_id: tool_call_id.clone(),
                stop_reason: StopReason::Completed,
                fidelity: None,
            };
            crate::model::push_segment(
                &mut events,
                &arguments,
                complete,
                |event_type, arguments| ModelPayload::PartialToolCall {
                    role: Role::Assistant,
                    event_type,
                    name: call.name.clone(),
                    arguments,
                    tool_call_id: tool_call_id.clone(),
                    stop_reason: StopReason::Completed,
                },
            );
        }
        let (input, output) = match turn.usage {
            Some(usage) => (usage.input, usage.output),
            None => (
                to_u64(history_chars(&request.history) / 4),
                to_u64(produced / 4),
            ),
        };
        events.push(ModelEvent::Usage(Usage {
            cache_read: 0,
            cache_write: 0,
            output,
            total: input.saturating_add(output),
        }));
        events.push(ModelEvent::End(ModelOutcome::completed()));
        events
    }
}

/// Characters of the content of the history (texts, thinking, tool names and arguments, tool
/// outputs, image references), for the usage estimate.
fn history_chars(history: &[ModelPayload]) -> usize {
    history
        .iter()
        .map(|m| match m {
            ModelPayload::Text { text, .. } | ModelPayload::PartialText { text, .. } => {
                text.chars().count()
            }
            ModelPayload::Thinking { thinking, .. }
            | ModelPayload::PartialThinking { thinking, .. } => thinking.chars().count(),
            ModelPayload::ToolCall {
                name, arguments, ..
            }
            | ModelPayload::PartialToolCall {
                name, arguments, ..
            } => name.chars().count() + arguments.chars().count(),
            ModelPayload::ToolCallOutput { output, .. }
            | ModelPayload::PartialToolCallOutput { output, .. } => output.chars().count(),
            ModelPayload::ImageUrl { image_url, .. } => image_url.chars().count(),
            ModelPayload::InlineData { data, .. } | ModelPayload::InlineThinking { data, .. } => {
                data.chars().count()
            }
        })
        .sum()
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt;
    use serde_json::json;

    use crate::message::{EventType, ModelPayload, Role, StopReason};
    use crate::model::scripted::ScriptedModel;
    use crate::model::{
        Model, ModelEvent, ModelOutcome, ModelRequest, ModelSession, ModelSessionContext,
    };

    fn open(script: serde_json::Value, ctx: &ModelSessionContext) -> Box<dyn ModelSession> {
        ScriptedModel::from_json_str(&script.to_string())
            .unwrap()
            .open(ctx)
    }

    fn root(script: serde_json::Value) -> Box<dyn ModelSession> {
        open(script, &ModelSessionContext::default())
    }

    fn subagent(script: serde_json::Value, prompt: Option<&str>) -> Box<dyn ModelSession> {
        let ctx = ModelSessionContext {
            session_id: "child".to_string(),
            is_subagent: true,
            first_prompt: prompt.map(str::to_string),
            ..ModelSessionContext::default()
        };
        open(script, &ctx)
    }

    fn request(history: Vec<ModelPayload>) -> ModelRequest {
        ModelRequest {
            system_prompt: Arc::from("system"),
            history: Arc::new(history),
            tools: Arc::new(Vec::new()),
        }
    }

    fn output(id: &str, text: &str) -> ModelPayload {
        ModelPayload::ToolCallOutput {
            role: Role::User,
            output: text.to_string(),
            images: Vec::new(),
            tool_call_id: id.to_string(),
            stop_reason: StopReason::Completed,
        }
    }

    fn user(text: &str) -> ModelPayload {
        ModelPayload::Text {
            role: Role::User,
            text: text.to_string(),
            sender: None,
            stop_reason: StopReason::Completed,
            fidelity: None,
        }
    }

    async fn run(session: &mut dyn ModelSession, history: Vec<ModelPayload>) -> Vec<ModelEvent> {
        session.stream(request(history)).collect().await
    }

    /// The complete messages and the end of a request, one short line each.
    fn summary(events: &[ModelEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Complete(ModelPayload::Text { text, .. }) => {
                    Some(format!("text {text}"))
                }
                ModelEvent::Complete(ModelPayload::Thinking { thinking, .. }) => {
                    Some(format!("thinking {thinking}"))
                }
                ModelEvent::Complete(ModelPayload::ToolCall {
                    name,
                    arguments,
                    tool_call_id,
                    ..
                }) => Some(format!("{tool_call_id} {name} {arguments}")),
                ModelEvent::End(outcome) => Some(format!(
                    "end {} {}",
                    outcome.status,
                    outcome.error_message.as_deref().unwrap_or("-")
                )),
                _ => None,
            })
            .collect()
    }

    fn partial_text(event_type: EventType, text: &str) -> ModelEvent {
        ModelEvent::Partial(ModelPayload::PartialText {
            role: Role::Assistant,
            event_type,
            text: text.to_string(),
            stop_reason: StopReason::Completed,
        })
    }

    #[tokio::test]
    async fn turns_in_order_with_repeat_then_script_finished() {
        let mut s = root(json!({"turns": [{"text": "A", "repeat": 2}, {"text": "B"}]}));
        let mut texts = Vec::new();
        for _ in 0..5 {
            texts.extend(summary(&run(s.as_mut(), Vec::new()).await));
        }
        assert_eq!(
            texts.join(" | "),
            "text A | end completed - | text A | end completed - | text B | end completed - | \
             text script finished | end completed - | text script finished | end completed -"
        );
    }

    #[tokio::test]
    async fn call_ids_count_per_session_across_requests() {
        let script = json!({"turns": [
            {"tool_calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]},
            {"error": "failed", "tool_calls": [{"name": "never"}]},
            {"text": "t", "tool_calls": [{"name": "c", "arguments": {}}]}
        ]});
        let mut s = root(script.clone());
        assert_eq!(
            summary(&run(s.as_mut(), Vec::new()).await),
            ["call_0 a {}", "call_1 b {}", "end completed -"]
        );
        assert_eq!(
            summary(&run(s.as_mut(), Vec::new()).await),
            ["end failed scripted failed error"]
        );
        assert_eq!(
            summary(&run(s.as_mut(), Vec::new()).await),
            ["text t", "call_2 c {}", "end completed -"]
        );
        // Another session of the same model counts from 0 again.
        let mut other = root(script);
        assert_eq!(
            summary(&run(other.as_mut(), Vec::new()).await),
            ["call_0 a {}", "call_1 b {}", "end completed -"]
        );
    }

    #[tokio::test]
    async fn object_arguments_are_compact_json_and_strings_verbatim() {
        let mut s = root(json!({"turns": [{"tool_calls": [
            {"name": "exec_command", "arguments": {"cmd": "echo hi", "description": "say hi", "n": [1, true]}},
            {"name": "exec_command", "arguments": "{\"cmd\": \"echo hi\""},
            {"name": "list_commands"}
        ]}]}));
        assert_eq!(
            summary(&run(s.as_mut(), Vec::new()).await),
            [
                r#"call_0 exec_command {"cmd":"echo hi","description":"say hi","n":[1,true]}"#,
                r#"call_1 exec_command {"cmd": "echo hi""#,
                "call_2 list_commands {}",
                "end completed -",
            ]
        );
    }

    #[tokio::test]
    async fn placeholders_take_the_first_group_over_tool_outputs() {
        let mut s = root(json!({"turns": [{"tool_calls": [
            {"name": "kill_command", "arguments": {"process_id": "{{output:0:process_id: (\\w+)}}",
                                                   "nested": {"list": ["at {{output:-1:(\\d{2}:\\d{2}):\\d{2}}}"]}}},
            {"name": "input_command", "arguments": "{\"text\": \"{{output:1:say (.*)}}\", \"x\": \"{{output:5:(.)}}\"}"},
            {"name": "echo", "arguments": {"q": "{{output:-2:(\"[^\"]*\")}}", "none": "{{output:0:(zzz)}}"}}
        ]}]}));
        let history = vec![
            user("start"),
            output("call_0", "started; process_id: cmd_7"),
            user("between"),
            output("call_1", "say \"quoted\" words"),
            output("call_2", "clock 12:34:56"),
        ];
        assert_eq!(
            summary(&run(s.as_mut(), history).await),
            [
                r#"call_0 kill_command {"process_id":"cmd_7","nested":{"list":["at 12:34"]}}"#,
                // A string argument is substituted verbatim (no JSON escaping) ...
                r#"call_1 input_command {"text": ""quoted" words", "x": ""}"#,
                // ... an object's strings are escaped when the object is serialized.
                r#"call_2 echo {"q":"\"quoted\"","none":""}"#,
                "end completed -",
            ]
        );
    }

    #[tokio::test]
    async fn error_turns_end_with_their_status_and_consume_a_turn() {
        let mut s = root(json!({"turns": [
            {"error": "failed", "text": "ignored"}, {"error": "timeout"}, {"error": "malformed"}, {"error": "auth"},
            {"error": null, "text": "ok"}
        ]}));
        for status in [
            StopReason::Failed,
            StopReason::Timeout,
            StopReason::Malformed,
            StopReason::Auth,
        ] {
            assert_eq!(
                run(s.as_mut(), Vec::new()).await,
                [ModelEvent::End(ModelOutcome::error(
                    status,
                    format!("scripted {status} error")
                ))]
            );
        }
        assert_eq!(
            summary(&run(s.as_mut(), Vec::new()).await),
            ["text ok", "end completed -"]
        );
    }

    #[tokio::test]
    async fn subagents_play_the_first_matching_children_entry() {
        let script = json!({
            "turns": [{"text": "root"}],
            "children": [
                {"when_prompt_contains": "lint", "turns": [{"text": "linting"}]},
                {"when_prompt_contains": "test", "turns": [{"text": "testing"}]}
            ]
        });
        let first = |mut s: Box<dyn ModelSession>| async move {
            summary(&run(s.as_mut(), Vec::new()).await)[0].clone()
        };
        assert_eq!(first(root(script.clone())).await, "text root");
        assert_eq!(
            first(subagent(script.clone(), Some("please lint src/"))).await,
            "text linting"
        );
        assert_eq!(
            first(subagent(script.clone(), Some("run the tests"))).await,
            "text testing"
        );
        assert_eq!(
            first(subagent(script.clone(), Some("test then lint"))).await,
            "text linting"
        );
        assert_eq!(
            first(subagent(script.clone(), Some("format"))).await,
            "text script finished"
        );
        assert_eq!(first(subagent(script, None)).await, "text script finished");
    }

    // Real (short) time: the crate's tokio has no `test-util` feature, so `start_paused` is not
    // available.
    #[tokio::test]
    async fn delay_is_slept_inside_the_stream() {
        let mut s = root(
            json!({"turns": [{"text": "late", "delay_ms": 300}, {"error": "timeout", "delay_ms": 200}]}),
        );
        let started = std::time::Instant::now();
        let mut stream = s.stream(request(Vec::new()));
        // Nothing happens before the stream is polled, and nothing arrives before the delay.
        assert!(
            tokio::time::timeout(Duration::from_millis(150), stream.next())
                .await
                .is_err()
        );
        assert_eq!(
            stream.next().await,
            Some(partial_text(EventType::Start, ""))
        );
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(stream.count().await, 5);

        let started = std::time::Instant::now();
        let events: Vec<ModelEvent> = s.stream(request(Vec::new())).collect().await;
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert_eq!(summary(&events), ["end timeout scripted timeout error"]);

        // Dropping a delayed stream cancels it: the next request gets the next turn at once.
        let mut s = root(json!({"turns": [{"text": "slow", "delay_ms": 60000}, {"text": "next"}]}));
        drop(s.stream(request(Vec::new())));
        let started = std::time::Instant::now();
        assert_eq!(
            summary(&run(s.as_mut(), Vec::new()).await),
            ["text next", "end completed -"]
        );
        assert!(started.elapsed() < Duration::from_millis(1000));
    }

    /// Every event as one line: its kind and the payload's wire JSON.
    fn lines(events: &[ModelEvent]) -> Vec<String> {
        let json = |p: &ModelPayload| serde_json::to_string(p).unwrap();
        events
            .iter()
            .map(|e| match e {
                ModelEvent::Partial(p) => format!("partial {}", json(p)),
                ModelEvent::Complete(p) => format!("complete {}", json(p)),
                ModelEvent::Usage(u) => format!("usage {}", serde_json::to_string(u).unwrap()),
                ModelEvent::End(o) => format!("end {o:?}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_full_turn_yields_events_in_order() {
        let mut s = root(json!({"turns": [{
            "thinking": "hmm", "text": "hello",
            "tool_calls": [{"name": "exec_command", "arguments": {"cmd": "ls"}}],
            "usage": {"input": 10, "output": 5}
        }]}));
        let expected = r#"
partial {"type":"partial_thinking","role":"assistant","event_type":"start","thinking":"","stop_reason":"completed"}
partial {"type":"partial_thinking","role":"assistant","event_type":"delta","thinking":"hmm","stop_reason":"completed"}
partial {"type":"partial_thinking","role":"assistant","event_type":"stop","thinking":"","stop_reason":"completed"}
complete {"type":"thinking","role":"assistant","thinking":"hmm","stop_reason":"completed"}
partial {"type":"partial_text","role":"assistant","event_type":"start","text":"","stop_reason":"completed"}
partial {"type":"partial_text","role":"assistant","event_type":"delta","text":"hello","stop_reason":"completed"}
partial {"type":"partial_text","role":"assistant","event_type":"stop","text":"","stop_reason":"completed"}
complete {"type":"text","role":"assistant","text":"hello","stop_reason":"completed"}
partial {"type":"partial_tool_call","role":"assistant","event_type":"start","name":"exec_command","arguments":"","tool_call_id":"call_0","stop_reason":"completed"}
partial {"type":"partial_tool_call","role":"assistant","event_type":"delta","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","tool_call_id":"call_0","stop_reason":"completed"}
partial {"type":"partial_tool_call","role":"assistant","event_type":"stop","name":"exec_command","arguments":"","tool_call_id":"call_0","stop_reason":"completed"}
complete {"type":"tool_call","role":"assistant","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","tool_call_id":"call_0","stop_reason":"completed"}
usage {"cache_read":0,"cache_write":0,"output":5,"total":15}
end ModelOutcome { status: Completed, error_message: None, permanent: false, retry_after_ms: None }"#;
        assert_eq!(
            lines(&run(s.as_mut(), Vec::new()).await).join("\n"),
            expected.trim_start()
        );
    }

    #[tokio::test]
    async fn empty_turn_is_usage_and_end_only() {
        let mut s = root(json!({"turns": [{}]}));
        assert_eq!(
            lines(&run(s.as_mut(), vec![user("0123456789")]).await),
            [
                r#"usage {"cache_read":0,"cache_write":0,"output":0,"total":2}"#.to_string(),
                format!("end {:?}", ModelOutcome::completed()),
            ]
        );
    }

    #[tokio::test]
    async fn usage_is_estimated_from_characters() {
        let mut s = root(json!({"turns": [{
            "thinking": "ééé", "text": "abcdefgh",
            "tool_calls": [{"name": "t", "arguments": {"a": "{{output:0:(.*)}}"}}]
        }]}));
        let usage = |events: Vec<ModelEvent>| lines(&events)[events.len() - 2].clone();
        // History: 13 + 6 + 2 = 21 characters → input 5.
        // Produced: 3 + 8 + 14 (`{"a":"output"}`) = 25 characters → output 6.
        let history = vec![
            user("hello, world!"),
            output("call_0", "output"),
            user("ok"),
        ];
        assert_eq!(
            usage(run(s.as_mut(), history).await),
            r#"usage {"cache_read":0,"cache_write":0,"output":6,"total":11}"#
        );
        // "script finished" is 15 characters → output 3; the history is empty.
        assert_eq!(
            usage(run(s.as_mut(), Vec::new()).await),
            r#"usage {"cache_read":0,"cache_write":0,"output":3,"total":3}"#
        );
    }
}
