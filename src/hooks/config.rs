//! The hooks config in Claude Code's shape (`hooks:` of the agent config, or `--hooks FILE`:
//! a `settings.json` or just its `hooks` object): per event a list of matcher groups, each with
//! the commands to run for the tools its matcher names.
//!
//! It parses, validates and matches; it runs nothing.

use std::path::Path;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

/// Default timeout of a hook command, in seconds.
pub(crate) const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

/// A bad hooks config.
#[derive(Debug, thiserror::Error)]
pub enum HookConfigError {
    /// A hooks file cannot be read.
    #[error("cannot read hooks file {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A hooks file is not valid YAML/JSON of the hooks shape.
    #[error("invalid hooks file {path}: {message}")]
    Invalid {
        /// The file.
        path: std::path::PathBuf,
        /// What does not parse, and where.
        message: String,
    },
    /// A matcher that is not a valid regex.
    #[error("hooks.{event}: bad matcher \"{matcher}\": {message}")]
    Matcher {
        /// The hook event (`PreToolUse`, `PostToolUse`).
        event: String,
        /// The matcher as written.
        matcher: String,
        /// The regex crate's reason, on one line.
        message: String,
    },
    /// A hook whose `type` is not `command`.
    #[error("hooks.{event}: hook type \"{kind}\" is not supported (use type: command)")]
    Type {
        /// The hook event.
        event: String,
        /// The type as written.
        kind: String,
    },
    /// A hook with an empty command.
    #[error("hooks.{event}: a hook has an empty command")]
    EmptyCommand {
        /// The hook event.
        event: String,
    },
    /// A timeout that is not a positive number of seconds.
    #[error("hooks.{event}: timeout must be a positive number of seconds")]
    Timeout {
        /// The hook event.
        event: String,
    },
}

/// Which tools a group applies to.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    /// `*` or empty.
    All,
    /// Letters, digits, `_`, `-` and `|`: exact tool names (Rookery's or Claude Code's).
    Names(Vec<String>),
    /// Anything else: an unanchored regex.
    Regex(Regex),
}

impl Matcher {
    fn parse(event: &str, text: &str) -> Result<Matcher, HookConfigError> {
        let text = text.trim();
        if text.is_empty() || text == "*" {
            return Ok(Matcher::All);
        }
        if text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '|'))
        {
            return Ok(Matcher::Names(
                text.split('|')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            ));
        }
        Regex::new(text)
            .map(Matcher::Regex)
            .map_err(|e| HookConfigError::Matcher {
                event: event.to_string(),
                matcher: text.to_string(),
                message: one_line(&e.to_string()),
            })
    }

    /// Whether the matcher names the tool by its Rookery name or its Claude Code name.
    pub(crate) fn matches(&self, tool: &str, alias: Option<&str>) -> bool {
        let one = |name: &str| match self {
            Matcher::All => true,
            Matcher::Names(names) => names.iter().any(|n| n == name),
            Matcher::Regex(re) => re.is_match(name),
        };
        one(tool) || alias.is_some_and(one)
    }
}

/// One hook command.
#[derive(Debug, Clone, PartialEq)]
pub struct HookCommand {
    /// Run with `bash -c` in the workspace.
    pub command: String,
    /// How long the hook may run before it is killed with its process tree.
    pub timeout: std::time::Duration,
    /// What the hook is told about a call.
    pub view: HookView,
}

/// How a hook sees a call: as Rookery names it (hooks of the agent config), or as Claude Code
/// would (hooks from a Claude Code settings file: `tool_name` `Bash`, `tool_input.command`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookView {
    /// Rookery's tool names and fields.
    Rookery,
    /// Claude Code's names and fields beside Rookery's.
    ClaudeCode,
}

#[derive(Debug, Clone)]
struct Group {
    matcher: Matcher,
    hooks: Vec<HookCommand>,
}

/// The hooks of a session: per event, its matcher groups in config order.
#[derive(Debug, Clone, Default)]
pub struct HooksConfig {
    groups: [Vec<Group>; HookEvent::ALL.len()],
}

/// The hook events Rookery runs, named as Claude Code names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    /// Before a tool call runs: may allow, ask, deny or rewrite it.
    PreToolUse,
    /// After a tool call ran: sees its output, may add context for the model.
    PostToolUse,
    /// A user prompt (a task's or a steer's) before the model sees it: may block it or add
    /// context.
    UserPromptSubmit,
    /// The main agent is about to end its task: may make it go on, with a reason.
    Stop,
    /// A subagent is about to end its task: may make it go on, with a reason.
    SubagentStop,
    /// A session starts (`startup`, `resume`) or restarts after a compaction (`compact`): may
    /// add context.
    SessionStart,
    /// A session closes: told why; its output is ignored.
    SessionEnd,
    /// A compaction is about to run (`manual`, `auto`).
    PreCompact,
    /// An approval waits for an answer.
    Notification,
    /// A call would be asked: the hook may answer allow or deny in the approver's place.
    PermissionRequest,
}

impl HookEvent {
    /// Every event, in the order of the config's slots.
    pub const ALL: [HookEvent; 10] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
        HookEvent::Notification,
        HookEvent::PermissionRequest,
    ];

    /// The event's name in the config and in the hook's input (`PreToolUse`, `Stop`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Notification => "Notification",
            HookEvent::PermissionRequest => "PermissionRequest",
        }
    }

    /// The event named `name` in a config.
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Whether a group's matcher applies (as in Claude Code: `UserPromptSubmit`, `Stop`,
    /// `SubagentStop` and `SessionEnd` run every group, whatever its matcher).
    pub fn uses_matcher(self) -> bool {
        !matches!(
            self,
            HookEvent::UserPromptSubmit
                | HookEvent::Stop
                | HookEvent::SubagentStop
                | HookEvent::SessionEnd
        )
    }

    fn slot(self) -> usize {
        HookEvent::ALL
            .iter()
            .position(|e| *e == self)
            .unwrap_or_default()
    }
}

#[derive(Debug, Deserialize)]
struct RawGroup {
    #[serde(default)]
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<RawHook>,
}

#[derive(Debug, Deserialize)]
struct RawHook {
    #[serde(rename = "type", default = "command_type")]
    kind: String,
    #[serde(default)]
    command: String,
    #[serde(default)]
    timeout: Option<f64>,
}

fn command_type() -> String {
    "command".to_string()
}

impl<'de> Deserialize<'de> for HooksConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        HooksConfig::from_value(value, HookView::Rookery).map_err(serde::de::Error::custom)
    }
}

impl HooksConfig {
    /// From the `hooks` object (`{"PreToolUse": [...], ...}`). Events Rookery does not know
    /// are ignored with a warning. Its hooks see calls in `view`.
    pub fn from_value(value: Value, view: HookView) -> Result<Self, HookConfigError> {
        let Value::Object(map) = value else {
            return Err(HookConfigError::Invalid {
                path: "hooks".into(),
                message: "hooks must be an object of events".into(),
            });
        };
        let mut cfg = HooksConfig::default();
        for (event, groups) in map {
            let Some(known) = HookEvent::parse(&event) else {
                tracing::warn!("hooks: event \"{event}\" is not supported; ignored");
                continue;
            };
            let target = &mut cfg.groups[known.slot()];
            let raw: Vec<RawGroup> =
                serde_json::from_value(groups).map_err(|e| HookConfigError::Invalid {
                    path: format!("hooks.{event}").into(),
                    message: e.to_string(),
                })?;
            for g in raw {
                target.push(Group {
                    matcher: Matcher::parse(&event, g.matcher.as_deref().unwrap_or(""))?,
                    hooks: g
                        .hooks
                        .into_iter()
                        .map(|h| hook_command(&event, h, view))
                        .collect::<Result<_, _>>()?,
                });
            }
        }
        Ok(cfg)
    }

    /// Reads `--hooks FILE`: a Claude Code `settings.json` (its `hooks` key) or just the hooks
    /// object. JSON, or YAML. Its hooks see calls in Claude Code's view.
    pub fn from_file(path: &Path) -> Result<Self, HookConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| HookConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |message: String| HookConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(json_err) => serde_yaml::from_str(&text)
                .map_err(|_| invalid(format!("not JSON or YAML: {json_err}")))?,
        };
        let hooks = match value {
            Value::Object(mut map) if map.contains_key("hooks") => {
                map.remove("hooks").unwrap_or(Value::Null)
            }
            other => other,
        };
        HooksConfig::from_value(hooks, HookView::ClaudeCode).map_err(|e| match e {
            HookConfigError::Invalid { message, .. } => invalid(message),
            other => invalid(other.to_string()),
        })
    }

    /// `self` then `other` (both run).
    pub fn merged(&self, other: &HooksConfig) -> HooksConfig {
        let mut out = self.clone();
        for (mine, theirs) in out.groups.iter_mut().zip(&other.groups) {
            mine.extend(theirs.iter().cloned());
        }
        out
    }

    /// True when no hook is configured for any event.
    pub fn is_empty(&self) -> bool {
        self.groups.iter().all(Vec::is_empty)
    }

    /// True when some hook is configured for `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        !self.groups[event.slot()].is_empty()
    }

    /// The commands of `event` that apply to `subject` (a tool, also known to Claude Code as
    /// `alias`; a `SessionStart` source; a `PreCompact` trigger; a `Notification` type), in
    /// config order. Events without a matcher run every group.
    pub fn matching(
        &self,
        event: HookEvent,
        subject: &str,
        alias: Option<&str>,
    ) -> Vec<HookCommand> {
        self.groups[event.slot()]
            .iter()
            .filter(|g| !event.uses_matcher() || g.matcher.matches(subject, alias))
            .flat_map(|g| g.hooks.iter().cloned())
            .collect()
    }
}

/// A regex error's last line (its message without the caret picture).
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or(text)
        .to_string()
}

fn hook_command(event: &str, h: RawHook, view: HookView) -> Result<HookCommand, HookConfigError> {
    if h.kind != "command" {
        return Err(HookConfigError::Type {
            event: event.to_string(),
            kind: h.kind,
        });
    }
    if h.command.trim().is_empty() {
        return Err(HookConfigError::EmptyCommand {
            event: event.to_string(),
        });
    }
    let secs = h.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if !(secs.is_finite() && secs > 0.0) {
        return Err(HookConfigError::Timeout {
            event: event.to_string(),
        });
    }
    Ok(HookCommand {
        command: h.command,
        timeout: std::time::Duration::from_secs_f64(secs.min(86_400.0)),
        view,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(json: &str) -> Result<HooksConfig, HookConfigError> {
        HooksConfig::from_value(
            serde_json::from_str(json).unwrap_or(Value::Null),
            HookView::Rookery,
        )
    }

    #[test]
    fn matchers_exact_lists_regexes_and_all() {
        let c = cfg(r#"{"PreToolUse": [
            {"matcher": "exec_command|bash", "hooks": [{"type": "command", "command": "a"}]},
            {"matcher": "write.*", "hooks": [{"type": "command", "command": "b", "timeout": 5}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": "c"}]},
            {"hooks": [{"type": "command", "command": "d"}]}
        ], "Stop": []}"#)
        .unwrap();
        let names = |t: &str| -> Vec<String> {
            c.matching(HookEvent::PreToolUse, t, None)
                .into_iter()
                .map(|h| h.command)
                .collect()
        };
        assert_eq!(names("exec_command"), ["a", "c", "d"]);
        assert_eq!(names("exec"), ["c", "d"]);
        assert_eq!(names("write_file"), ["b", "c", "d"]);
        assert_eq!(names("rewrite"), ["b", "c", "d"]);
        assert!(
            c.matching(HookEvent::PostToolUse, "exec_command", None)
                .is_empty()
        );
        let b = c.matching(HookEvent::PreToolUse, "write_file", None);
        assert_eq!(b[0].timeout, std::time::Duration::from_secs(5));
        assert_eq!(b[1].timeout, std::time::Duration::from_secs(60));
    }

    #[test]
    fn a_matcher_takes_the_claude_code_name_too() {
        let c = cfg(r#"{"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"command": "a"}]},
            {"matcher": "Edit|Write", "hooks": [{"command": "b"}]},
            {"matcher": "exec_command", "hooks": [{"command": "c"}]}
        ]}"#)
        .unwrap();
        let names = |t: &str, alias: Option<&str>| -> Vec<String> {
            c.matching(HookEvent::PreToolUse, t, alias)
                .into_iter()
                .map(|h| h.command)
                .collect()
        };
        assert_eq!(names("exec_command", Some("Bash")), ["a", "c"]);
        assert_eq!(names("bash", Some("Bash")), ["a"]);
        assert_eq!(names("write_file", Some("Write")), ["b"]);
        assert!(names("list_commands", None).is_empty());
    }

    #[test]
    fn lifecycle_events_match_on_their_subject_or_run_every_group() {
        let c = cfg(r#"{
            "SessionStart": [{"matcher": "startup", "hooks": [{"command": "s"}]},
                             {"matcher": "resume|compact", "hooks": [{"command": "r"}]}],
            "Stop": [{"matcher": "ignored", "hooks": [{"command": "t"}]}],
            "Notification": [{"matcher": "permission_prompt", "hooks": [{"command": "n"}]}]
        }"#)
        .unwrap();
        let names = |e: HookEvent, subject: &str| -> Vec<String> {
            c.matching(e, subject, None)
                .into_iter()
                .map(|h| h.command)
                .collect()
        };
        assert_eq!(names(HookEvent::SessionStart, "startup"), ["s"]);
        assert_eq!(names(HookEvent::SessionStart, "compact"), ["r"]);
        assert_eq!(names(HookEvent::Stop, ""), ["t"]);
        assert!(names(HookEvent::Notification, "idle_prompt").is_empty());
        assert!(c.has(HookEvent::Stop) && !c.has(HookEvent::PreCompact));
        assert!(
            HookEvent::ALL
                .iter()
                .all(|e| HookEvent::parse(e.as_str()) == Some(*e))
        );
    }

    #[test]
    fn bad_entries_are_errors() {
        let e = cfg(r#"{"PreToolUse": [{"matcher": "(", "hooks": []}]}"#).unwrap_err();
        assert!(e.to_string().contains("bad matcher"), "{e}");
        let e = cfg(r#"{"PreToolUse": [{"hooks": [{"type": "prompt", "command": "x"}]}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("prompt"), "{e}");
        let e =
            cfg(r#"{"PreToolUse": [{"hooks": [{"command": "x", "timeout": 0}]}]}"#).unwrap_err();
        assert!(e.to_string().contains("timeout"), "{e}");
        assert!(cfg(r#"{"PreToolUse": {"x": 1}}"#).is_err());
    }

    #[test]
    fn settings_json_or_bare_hooks_object() {
        let dir = tempfile::tempdir().unwrap();
        let settings = dir.path().join("settings.json");
        std::fs::write(
            &settings,
            r#"{"permissions": {}, "hooks": {"PostToolUse": [{"matcher": "", "hooks": [{"type": "command", "command": "x"}]}]}}"#,
        )
        .unwrap();
        let c = HooksConfig::from_file(&settings).unwrap();
        assert_eq!(
            c.matching(HookEvent::PostToolUse, "read_file", None).len(),
            1
        );
        assert_eq!(
            c.matching(HookEvent::PostToolUse, "read_file", None)[0].view,
            HookView::ClaudeCode
        );
        let bare = dir.path().join("hooks.json");
        std::fs::write(
            &bare,
            r#"{"PreToolUse": [{"matcher": "read_file", "hooks": [{"type": "command", "command": "y"}]}]}"#,
        )
        .unwrap();
        let b = HooksConfig::from_file(&bare).unwrap();
        assert_eq!(
            b.matching(HookEvent::PreToolUse, "read_file", None).len(),
            1
        );
        assert_eq!(
            c.merged(&b)
                .matching(HookEvent::PreToolUse, "read_file", None)
                .len(),
            1
        );
        let e = HooksConfig::from_file(&dir.path().join("missing.json")).unwrap_err();
        assert!(e.to_string().contains("missing.json"), "{e}");
    }
}
