//! What a recorded session looks like at a glance: its status, times, model, tool profile,
//! first prompt and subagent pointers, computed from its trace records.
//!
//! Pure interpretation of records already read (`catalog.rs` finds and reads the files): this
//! module must not touch the file system, and it never writes or repairs a trace.

use serde::Serialize;
use serde_json::Value;

use crate::message::{EventPayload, ModelPayload, OmniMessage, Payload, Role, Sender, StopReason};

/// The tool profile recorded when `session_meta` names none (every session so far).
pub const DEFAULT_TOOL_PROFILE: &str = "penguin";

/// Where a recorded session stands, as far as its trace tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordedStatus {
    /// The last task ended with this `task_end` status (`completed`, `failed`, `aborted`, …).
    Ended(StopReason),
    /// A task started after the last `task_end` and has none yet: it is running now, or the
    /// process that ran it died.
    Open,
    /// A `session_meta` and no task yet.
    New,
    /// No `session_meta`: not a trace this build can read as a session.
    Unknown,
}

impl RecordedStatus {
    /// The status as `rookery sessions` prints it: a `task_end` status, `open`, `new` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordedStatus::Ended(s) => s.as_str(),
            RecordedStatus::Open => "open",
            RecordedStatus::New => "new",
            RecordedStatus::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for RecordedStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RecordedStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One session of the catalog, summarized from all of its trace files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// Where the session stands.
    pub status: RecordedStatus,
    /// Timestamp (UTC) of the first record, normally the `session_meta`.
    pub started: Option<String>,
    /// Timestamp (UTC) of the last record.
    pub last_activity: Option<String>,
    /// `provider` of the last `session_meta`.
    pub provider: Option<String>,
    /// `model_id` of the last `session_meta`.
    pub model: Option<String>,
    /// `tool_profile` of the last `session_meta`, else [`DEFAULT_TOOL_PROFILE`].
    pub tool_profile: String,
    /// `workspace` of the last `session_meta`.
    pub workspace: Option<String>,
    /// `session_meta.source` (`subagent` for a child session).
    pub source: Option<String>,
    /// `session_meta.owner`: the `rookery serve --auth` principal it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The session whose trace points at this one with a `subagent` record (set by the catalog).
    pub parent: Option<String>,
    /// `session_meta.forked_from.session_id`: the session this one was forked from.
    pub forked_from: Option<String>,
    /// First line of the first prompt (a user text not written by the harness).
    pub first_prompt: Option<String>,
    /// Tasks started (prompts not written by the harness).
    pub tasks: usize,
    /// Child sessions named by `subagent` records, in order, without repeats.
    pub subagents: Vec<String>,
    /// The trace files, in history order.
    pub files: Vec<String>,
    /// Records read.
    pub records: usize,
}

impl SessionSummary {
    /// True for a child session (`session_meta.source: "subagent"`).
    pub fn is_subagent(&self) -> bool {
        self.source.as_deref() == Some("subagent")
    }
}

/// Summarizes `records` (all files of one session, in order). `metas` are the raw JSON payloads
/// of its `session_meta` records, for fields this build does not type (`tool_profile`).
pub fn summarize(
    id: &str,
    records: &[OmniMessage],
    metas: &[Value],
    files: Vec<String>,
) -> SessionSummary {
    let mut summary = SessionSummary {
        id: id.to_string(),
        status: RecordedStatus::Unknown,
        started: records.first().map(|r| r.timestamp.clone()),
        last_activity: records.last().map(|r| r.timestamp.clone()),
        provider: None,
        model: None,
        tool_profile: metas
            .last()
            .and_then(|m| m.get("tool_profile"))
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_TOOL_PROFILE)
            .to_string(),
        workspace: None,
        source: None,
        owner: None,
        parent: None,
        forked_from: None,
        first_prompt: None,
        tasks: 0,
        subagents: Vec::new(),
        files,
        records: records.len(),
    };
    let mut saw_meta = false;
    let mut task_open = false;
    let mut last_end: Option<StopReason> = None;
    // A compaction's own records (and the summary a compacted context starts with) are not
    // the user's: they neither open a task nor count as one.
    let mut in_compaction = false;
    for record in records.iter().filter(|r| !r.has_origin()) {
        match &record.payload {
            Payload::Event(EventPayload::CompactionBegin { .. }) => in_compaction = true,
            Payload::Event(EventPayload::CompactionEnd { .. }) => in_compaction = false,
            Payload::Model(_) | Payload::Event(_) if in_compaction => {}
            Payload::Model(ModelPayload::Text {
                role: Role::User,
                text,
                sender: Some(Sender::Harness),
                ..
            }) if text.starts_with("[context_summary]") => {}
            Payload::SessionMeta(meta) => {
                saw_meta = true;
                summary.provider = Some(meta.provider.clone());
                summary.model = Some(meta.model_id.clone());
                summary.workspace = Some(meta.workspace.clone());
                if summary.source.is_none() {
                    summary.source = meta.source.clone();
                }
                if summary.forked_from.is_none() {
                    summary.forked_from = meta.forked_from.as_ref().map(|f| f.session_id.clone());
                }
                if summary.owner.is_none() {
                    summary.owner = meta.owner.clone();
                }
            }
            Payload::Model(ModelPayload::Text {
                role: Role::User,
                text,
                sender,
                ..
            }) => {
                task_open = true;
                if *sender != Some(Sender::Harness) {
                    summary.tasks += 1;
                    if summary.first_prompt.is_none() {
                        summary.first_prompt = Some(first_line(text));
                    }
                }
            }
            Payload::Model(p) if p.role() == Role::User && !p.is_partial() => task_open = true,
            Payload::Event(EventPayload::RequestBegin {}) => task_open = true,
            Payload::Event(EventPayload::TaskEnd { status, .. }) => {
                task_open = false;
                last_end = Some(*status);
            }
            Payload::Event(EventPayload::Subagent { session_id })
                if !summary.subagents.contains(session_id) =>
            {
                summary.subagents.push(session_id.clone());
            }
            _ => {}
        }
    }
    summary.status = match (saw_meta, task_open, last_end) {
        (false, _, _) => RecordedStatus::Unknown,
        (true, true, _) => RecordedStatus::Open,
        (true, false, Some(status)) => RecordedStatus::Ended(status),
        (true, false, None) => RecordedStatus::New,
    };
    summary
}

/// The first non-blank line of `text`, trimmed (empty when there is none).
pub fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{SessionMeta, build};
    use serde_json::json;

    fn meta(source: Option<&str>) -> OmniMessage {
        OmniMessage::session_meta(SessionMeta {
            session_id: "s".into(),
            provider: "scripted".into(),
            model_id: "m1".into(),
            workspace: "/w".into(),
            source: source.map(str::to_string),
            ..SessionMeta::default()
        })
    }

    fn status_of(records: &[OmniMessage]) -> RecordedStatus {
        summarize("s", records, &[], vec![]).status
    }

    #[test]
    fn status_follows_the_last_task() {
        assert_eq!(status_of(&[]), RecordedStatus::Unknown);
        assert_eq!(status_of(&[meta(None)]), RecordedStatus::New);
        let done = [
            meta(None),
            build::user_text("hi", None),
            build::request_begin(),
            build::task_end(StopReason::Completed),
        ];
        assert_eq!(
            status_of(&done),
            RecordedStatus::Ended(StopReason::Completed)
        );
        let mut again = done.to_vec();
        again.push(build::user_text("more", None));
        assert_eq!(status_of(&again), RecordedStatus::Open);
        again.push(build::abort(Some("user".into())));
        again.push(build::task_end(StopReason::Aborted));
        assert_eq!(
            status_of(&again),
            RecordedStatus::Ended(StopReason::Aborted)
        );
        assert_eq!(
            status_of(&[
                build::user_text("x", None),
                build::task_end(StopReason::Failed)
            ]),
            RecordedStatus::Unknown,
            "no session_meta"
        );
    }

    #[test]
    fn summary_fields() {
        let records = vec![
            meta(None),
            build::user_text("\n  Fix the build  \nthen test", None),
            OmniMessage::event(EventPayload::Subagent {
                session_id: "c1".into(),
            }),
            OmniMessage::event(EventPayload::Subagent {
                session_id: "c1".into(),
            }),
            build::task_end(StopReason::Failed),
            build::user_text("[background_task_done] …", Some(Sender::Harness)),
            build::user_text("second", None),
            build::task_end(StopReason::Completed),
        ];
        let s = summarize("s", &records, &[], vec!["/t/s_001.jsonl".into()]);
        assert_eq!(s.status, RecordedStatus::Ended(StopReason::Completed));
        assert_eq!(s.first_prompt.as_deref(), Some("Fix the build"));
        assert_eq!(s.tasks, 2);
        assert_eq!(s.subagents, vec!["c1".to_string()]);
        assert_eq!(s.model.as_deref(), Some("m1"));
        assert_eq!(s.provider.as_deref(), Some("scripted"));
        assert_eq!(s.workspace.as_deref(), Some("/w"));
        assert_eq!(s.tool_profile, DEFAULT_TOOL_PROFILE);
        assert_eq!(s.started.as_deref(), Some(records[0].timestamp.as_str()));
        assert_eq!(
            s.last_activity.as_deref(),
            Some(records[7].timestamp.as_str())
        );
        assert_eq!(s.records, 8);
        assert!(!s.is_subagent());
    }

    #[test]
    fn later_meta_and_raw_profile_win() {
        let mut second = meta(None);
        if let Payload::SessionMeta(m) = &mut second.payload {
            m.model_id = "m2".into();
        }
        let records = [meta(Some("subagent")), second];
        let raw = [
            json!({"tool_profile": "other"}),
            json!({"tool_profile": "x2"}),
        ];
        let s = summarize("s", &records, &raw, vec![]);
        assert_eq!(s.model.as_deref(), Some("m2"));
        assert_eq!(s.tool_profile, "x2");
        assert!(s.is_subagent());
        let s = summarize("s", &records, &[json!({"tool_profile": 3})], vec![]);
        assert_eq!(s.tool_profile, DEFAULT_TOOL_PROFILE);
    }

    #[test]
    fn harness_only_input_is_no_prompt_and_origin_records_are_ignored() {
        let records = [
            meta(None),
            build::user_text("notice", Some(Sender::Harness)),
            build::user_text("child prompt", None).with_origin("c"),
        ];
        let s = summarize("s", &records, &[], vec![]);
        assert_eq!(s.first_prompt, None);
        assert_eq!(s.tasks, 0);
        assert_eq!(s.status, RecordedStatus::Open);
    }

    #[test]
    fn status_serializes_as_its_name() {
        assert_eq!(
            serde_json::to_value(RecordedStatus::Ended(StopReason::Failed)).unwrap(),
            json!("failed")
        );
        assert_eq!(RecordedStatus::Open.to_string(), "open");
        assert_eq!(first_line("  \n\t"), "");
    }
}
