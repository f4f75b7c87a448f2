//! Permission rules in Claude Code's syntax (`permissions: {allow, deny, ask}` of the agent
//! config or of a `--settings` file): `Bash(npm test:*)`, `Bash(git diff)`, `Read(./src/**)`,
//! `Edit(docs/**)`, `mcp__server`, `mcp__server__tool`, a bare tool name. The gate asks
//! [`PermissionRules::decide`] after the command policy and the PreToolUse hooks: deny, then
//! ask, then allow; no rule leaves the call to the approval mode.
//!
//! A shell rule matches the command's words, never a substring: a command with a shell
//! operator (`;`, `&`, `|`, `$(`, backticks, redirections, a newline) is compound and never
//! matches an allow rule; a deny or ask rule matches when any of its parts matches. Pure: it
//! reads no file (paths are resolved lexically against the workspace, and through symlinks that
//! exist) and runs nothing.

use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::Value;

use crate::tools::definition::{CommandArgument, ToolDefinitionConfig};

/// A rule list that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PermissionRuleError {
    /// `allow`, `deny` or `ask` is not a list of strings.
    #[error("permissions.{list} must be a list of rule strings")]
    NotList {
        /// The list's name.
        list: String,
    },
    /// A rule that does not parse.
    #[error("permissions.{list}: bad rule \"{rule}\": {message}")]
    Bad {
        /// The list it is in.
        list: String,
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        message: String,
    },
    /// `permissions` is not an object.
    #[error("permissions must be an object with allow, deny and ask lists")]
    NotObject,
}

/// What a rule matches.
#[derive(Debug, Clone)]
enum Matcher {
    /// Every call of a tool (by Rookery's or Claude Code's name), or of an MCP server's tools.
    Tool(String),
    /// Shell commands: the words of `prefix`, then anything (`prefix: true`) or nothing.
    Shell { words: Vec<String>, prefix: bool },
    /// File tools (`Read`, or the editing tools for `Edit`/`Write`/`MultiEdit`) on paths
    /// matching `glob`.
    Path { read: bool, pattern: String },
}

#[derive(Debug, Clone)]
struct Rule {
    text: String,
    matcher: Matcher,
}

/// Which list decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleDecision {
    /// A `deny` rule matched: the call is refused.
    Deny,
    /// An `ask` rule matched: the call is asked.
    Ask,
    /// An `allow` rule matched: the call runs without asking.
    Allow,
}

/// The rules of a session.
#[derive(Debug, Clone, Default)]
pub struct PermissionRules {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    ask: Vec<Rule>,
}

/// One call, as the rules see it.
pub struct RuleCall<'a> {
    /// The tool's Rookery name.
    pub name: &'a str,
    /// Its definition (the shell argument and Claude Code name), if the session has the tool.
    pub definition: Option<&'a ToolDefinitionConfig>,
    /// The arguments JSON text.
    pub arguments: &'a str,
    /// The session's workspace (relative path rules resolve against it).
    pub workspace: &'a Path,
}

impl PermissionRules {
    /// From the `permissions` object. Keys other than `allow`, `deny`, `ask` (e.g.
    /// `defaultMode`, `additionalDirectories`) are ignored with a warning.
    pub fn from_value(value: &Value) -> Result<Self, PermissionRuleError> {
        let Value::Object(map) = value else {
            return Err(PermissionRuleError::NotObject);
        };
        let mut rules = PermissionRules::default();
        for (key, list) in map {
            let target = match key.as_str() {
                "allow" => &mut rules.allow,
                "deny" => &mut rules.deny,
                "ask" => &mut rules.ask,
                other => {
                    tracing::warn!("permissions.{other} is not supported; ignored");
                    continue;
                }
            };
            let Value::Array(items) = list else {
                return Err(PermissionRuleError::NotList { list: key.clone() });
            };
            for item in items {
                let Some(text) = item.as_str() else {
                    return Err(PermissionRuleError::NotList { list: key.clone() });
                };
                if let Some(rule) = parse(key, text)? {
                    target.push(rule);
                }
            }
        }
        Ok(rules)
    }

    /// `self`'s rules then `other`'s.
    pub fn merged(&self, other: &PermissionRules) -> PermissionRules {
        let mut out = self.clone();
        out.allow.extend(other.allow.iter().cloned());
        out.deny.extend(other.deny.iter().cloned());
        out.ask.extend(other.ask.iter().cloned());
        out
    }

    /// True when no list has a rule.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && self.ask.is_empty()
    }

    /// Deny, then ask, then allow: the first list with a matching rule, and that rule's text.
    pub fn decide(&self, call: &RuleCall<'_>) -> Option<(RuleDecision, String)> {
        if self.is_empty() {
            return None;
        }
        let view = CallView::of(call);
        let lists = [
            (RuleDecision::Deny, &self.deny),
            (RuleDecision::Ask, &self.ask),
            (RuleDecision::Allow, &self.allow),
        ];
        lists.into_iter().find_map(|(decision, rules)| {
            let strict = decision == RuleDecision::Allow;
            rules
                .iter()
                .find(|r| view.matches(&r.matcher, strict))
                .map(|r| (decision, r.text.clone()))
        })
    }
}

/// Parses one rule; `None` for a rule on a tool Rookery does not have (warned about).
fn parse(list: &str, text: &str) -> Result<Option<Rule>, PermissionRuleError> {
    let bad = |message: &str| PermissionRuleError::Bad {
        list: list.to_string(),
        rule: text.to_string(),
        message: message.to_string(),
    };
    let t = text.trim();
    let (tool, spec) = match t.find('(') {
        Some(open) => {
            let Some(inner) = t[open + 1..].strip_suffix(')') else {
                return Err(bad("a rule is Tool or Tool(specifier)"));
            };
            (&t[..open], Some(inner.trim()))
        }
        None => (t, None),
    };
    if tool.is_empty()
        || !tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*'))
    {
        return Err(bad("a rule is Tool or Tool(specifier)"));
    }
    let matcher = match (tool, spec) {
        (_, None) | (_, Some("*")) | (_, Some("")) => Matcher::Tool(tool.to_string()),
        ("Bash", Some(spec)) => {
            let (body, prefix) = match spec.strip_suffix(":*").or_else(|| spec.strip_suffix(" *")) {
                Some(body) => (body, true),
                None => (spec, false),
            };
            if is_compound(body) {
                return Err(bad("a shell rule names one simple command"));
            }
            let words: Vec<String> = body.split_whitespace().map(str::to_string).collect();
            if words.is_empty() {
                return Err(bad("empty command"));
            }
            Matcher::Shell { words, prefix }
        }
        ("Read" | "Edit" | "Write" | "MultiEdit", Some(spec)) => Matcher::Path {
            read: tool == "Read",
            pattern: glob_regex(spec).map_err(|e| bad(&e.to_string()))?,
        },
        (other, Some(_)) => {
            tracing::warn!(
                "permissions.{list}: rule \"{text}\" names a tool Rookery has no rule syntax for ({other}); ignored"
            );
            return Ok(None);
        }
    };
    Ok(Some(Rule {
        text: t.to_string(),
        matcher,
    }))
}

/// Whether a command has shell syntax beyond one simple command: `;`, `&`, `|`, backticks,
/// `$(`, `<`, `>`, a newline.
pub(super) fn is_compound(command: &str) -> bool {
    command.contains([';', '&', '|', '`', '<', '>', '\n', '\r']) || command.contains("$(")
}

/// The shell command of a call of a shell tool (Claude Code's `Bash`), `None` for other tools.
pub(super) fn shell_command(call: &RuleCall<'_>) -> Option<String> {
    let view = CallView::of(call);
    view.command.filter(|_| view.alias == Some("Bash"))
}

/// The simple commands a compound command is made of (split at every operator, including
/// inside `$(…)` and backticks), each as its words.
fn parts(command: &str) -> Vec<Vec<String>> {
    command
        .split(|c: char| {
            matches!(
                c,
                ';' | '&' | '|' | '`' | '<' | '>' | '\n' | '\r' | '(' | ')' | '{' | '}'
            )
        })
        .map(|p| {
            p.split_whitespace()
                .map(|w| w.trim_start_matches('$').to_string())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

fn words_match(words: &[String], rule: &[String], prefix: bool) -> bool {
    words.starts_with(rule) && (prefix || words.len() == rule.len())
}

/// A gitignore-style pattern as a regex on absolute paths: `//abs` absolute, `~/x` under
/// `$HOME`, `/x`, `./x` or `x/y` under the workspace (filled in by [`CallView`]), a pattern
/// without `/` at any depth; `**` any path, `*` and `?` within one name. A directory matches
/// everything under it.
fn glob_regex(spec: &str) -> Result<String, regex::Error> {
    // The base is resolved per call; here: a marker the call replaces.
    let mut re = String::from("^");
    let rest = if let Some(abs) = spec.strip_prefix("//") {
        re.push('/');
        abs
    } else if let Some(home) = spec.strip_prefix("~/") {
        re.push_str("\u{1}HOME/");
        home
    } else if !spec.trim_start_matches("./").contains('/') {
        re.push_str("\u{1}WS/(?:.*/)?");
        spec.trim_start_matches("./")
    } else {
        re.push_str("\u{1}WS/");
        spec.trim_start_matches("./").trim_start_matches('/')
    };
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str("(?:.*/)?");
                } else {
                    re.push_str(".*");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    let re = format!("{}(?:/.*)?$", re.trim_end_matches('/'));
    // Checked once with empty bases; compiled per call with the real ones.
    Regex::new(&re.replace(['\u{1}'], ""))?;
    Ok(re)
}

/// A call's name, Claude Code name, shell command and file paths.
struct CallView<'a> {
    name: &'a str,
    alias: Option<&'static str>,
    command: Option<String>,
    paths: Vec<String>,
    workspace: String,
    home: String,
}

impl<'a> CallView<'a> {
    fn of(call: &RuleCall<'a>) -> CallView<'a> {
        let args: Value = serde_json::from_str(call.arguments).unwrap_or(Value::Null);
        let alias = call.definition.and_then(|d| d.claude_code_name());
        let command = match call.definition.and_then(|d| d.command_argument) {
            Some(CommandArgument::Command(arg)) => Some(
                args.get(arg)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            ),
            _ => None,
        };
        let workspace = real(call.workspace);
        let mut paths = Vec::new();
        let mut push = |p: &str| {
            let full = crate::tools::resolve_path(&workspace, p);
            paths.push(real(&full).display().to_string());
        };
        match alias {
            Some("MultiEdit") => {
                let patch = args.get("input").and_then(Value::as_str).unwrap_or("");
                for l in patch.lines() {
                    let l = l.trim();
                    for marker in [
                        "*** Add File: ",
                        "*** Update File: ",
                        "*** Delete File: ",
                        "*** Move to: ",
                    ] {
                        if let Some(p) = l.strip_prefix(marker) {
                            push(p.trim());
                        }
                    }
                }
            }
            Some("Read" | "Edit" | "Write") => {
                if let Some(p) = ["file_path", "path"]
                    .iter()
                    .find_map(|k| args.get(*k).and_then(Value::as_str))
                {
                    push(p);
                }
            }
            _ => {}
        }
        let home = std::env::var_os("HOME")
            .map(|h| real(Path::new(&h)).display().to_string())
            .unwrap_or_default();
        CallView {
            name: call.name,
            alias,
            command,
            paths,
            workspace: workspace.display().to_string(),
            home,
        }
    }

    fn is_named(&self, tool: &str) -> bool {
        if tool == self.name || Some(tool) == self.alias {
            return true;
        }
        // `mcp__server` and `mcp__server__*`: every tool of the server.
        let server = tool.strip_suffix("__*").unwrap_or(tool);
        server.starts_with("mcp__")
            && server.matches("__").count() == 1
            && self
                .name
                .strip_prefix(server)
                .is_some_and(|rest| rest.starts_with("__"))
    }

    /// `strict` (an allow rule): a compound command, or a patch with a path outside, never
    /// matches.
    fn matches(&self, m: &Matcher, strict: bool) -> bool {
        match m {
            Matcher::Tool(tool) => self.is_named(tool),
            Matcher::Shell { words, prefix } => {
                let Some(command) = &self.command else {
                    return false;
                };
                if self.alias != Some("Bash") {
                    return false;
                }
                if strict {
                    if is_compound(command) {
                        return false;
                    }
                    let own: Vec<String> = command.split_whitespace().map(str::to_string).collect();
                    words_match(&own, words, *prefix)
                } else {
                    parts(command)
                        .iter()
                        .any(|p| words_match(p, words, *prefix))
                }
            }
            Matcher::Path { read, pattern } => {
                let applies = match self.alias {
                    Some("Read") => *read,
                    Some("Edit" | "Write" | "MultiEdit") => !*read,
                    _ => false,
                };
                if !applies || self.paths.is_empty() {
                    return false;
                }
                let re = pattern
                    .replace("\u{1}WS", &regex::escape(&self.workspace))
                    .replace("\u{1}HOME", &regex::escape(&self.home));
                let Ok(re) = Regex::new(&re) else {
                    return false;
                };
                let hit = |p: &String| re.is_match(p);
                if strict {
                    self.paths.iter().all(hit)
                } else {
                    self.paths.iter().any(hit)
                }
            }
        }
    }
}

/// `path` with its `..` removed and the symlinks of its existing part followed.
fn real(path: &Path) -> PathBuf {
    let path = crate::tools::path_hint::normalize_lexically(path);
    if let Ok(p) = std::fs::canonicalize(&path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => real(dir).join(name),
        _ => path,
    }
}

#[cfg(test)]
#[path = "permission_rules_tests.rs"]
mod tests;
