//! The command policy (`commands.policy`, PenguinHarness compatible `forbidden` rules): named
//! regexes matched against the command text of the shell tools of both profiles, seen through
//! quoting, escapes and `sh -c`/`bash -c`/`eval` wrappers. Which argument holds a tool's command
//! text is declared by the tool's definition (`ToolDefinitionConfig::command_argument`:
//! `exec_command.cmd`, `bash.command`, and `input_command.chars`/`write_stdin.chars`, where a
//! lone Ctrl-C is exempt); the policy knows no tool by name.
//!
//! Pure: it compiles rules and answers "which rule forbids this", nothing else. It never runs
//! anything and never touches the trace (the session records the denial). A text rule cannot
//! see commands computed at run time (`$(echo rm) -rf /`): it is a guardrail, not a sandbox.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde::Deserialize;

use super::shell_words;
use crate::tools::definition::{CommandArgument, ToolDefinitionConfig};

/// One rule as written in the config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// The rule's name (named in the `approval_decision` reason and the refusal text).
    pub name: String,
    /// A regex (Rust `regex` syntax) searched in each candidate text of a command.
    pub pattern: String,
    /// False turns the rule off (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// `commands.policy`: `rules` replaces the default rules; `disable` turns rules off by name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// False turns the whole policy off (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Replaces the default rules, when given.
    #[serde(default)]
    pub rules: Option<Vec<RuleConfig>>,
    /// Rule names turned off.
    #[serde(default)]
    pub disable: Vec<String>,
}

fn yes() -> bool {
    true
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            enabled: true,
            rules: None,
            disable: Vec::new(),
        }
    }
}

/// Start of a simple command: the start of a text or a separator, then wrappers (`sudo`,
/// `env`, `nohup`, …), variable assignments and a directory prefix of the program.
const CMD: &str = r"(?:^|[;&|({`!]|\$\(|\bthen\s|\bdo\s|\belse\s)\s*(?:(?:sudo|doas|env|command|exec|nohup|time|nice|ionice|builtin|busybox)(?:\s+-[^\s;&|]*(?:\s+[A-Za-z0-9_]+)?)*\s+)*(?:[A-Za-z_][A-Za-z0-9_]*=[^\s;&|]*\s+)*(?:[^\s;&|]*/)?";
/// One more argument of the same command.
const ARG: &str = r"(?:\s+[^\s;&|)]+)*?\s+";
/// End of a word.
const END: &str = r"(?:$|[\s;&|)])";
/// `/`, `~`, `*`, `.` and their spellings, `$HOME`, and the top-level system directories.
const DANGER: &str = r"(?:/+\.?\*?|~/?\*?|\$\{?HOME\}?/?\*?|\*|\.\.?/?\*?|/+(?:bin|boot|dev|etc|home|lib|lib32|lib64|opt|proc|root|sbin|srv|sys|usr|var)/?\*?)";
/// Block devices.
const BLOCK_DEV: &str = r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme[0-9]|mmcblk[0-9]|disk[0-9]|rdisk[0-9]|md[0-9]|dm-[0-9]|loop[0-9]|mapper/)[^\s;&|)]*";

/// A program at command position followed, in any order, by every element of one of `sets`.
fn any_order(program: &str, sets: &[&[&str]]) -> String {
    let mut alts = Vec::new();
    for set in sets {
        for perm in permutations(set) {
            let body: String = perm.iter().map(|e| format!("{ARG}{e}")).collect();
            alts.push(body);
        }
    }
    format!("{CMD}{program}(?:{}){END}", alts.join("|"))
}

fn permutations<'a>(items: &[&'a str]) -> Vec<Vec<&'a str>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first);
            out.push(p);
        }
    }
    out
}

/// The default rules: `(name, pattern)`.
pub fn default_rules() -> Vec<(String, String)> {
    let r = r"(?:-[A-Za-z]*[rR][A-Za-z]*|--recursive)";
    let f = r"(?:-[A-Za-z]*f[A-Za-z]*|--force)";
    let rf = r"(?:-[A-Za-z]*(?:[rR][A-Za-z]*f|f[A-Za-z]*[rR])[A-Za-z]*)";
    let big_r = r"(?:-[A-Za-z]*R[A-Za-z]*|--recursive)";
    let rules = [
        (
            "rm-recursive-force",
            any_order("rm", &[&[r, f, DANGER], &[rf, DANGER]]),
        ),
        (
            "mkfs",
            format!(r"{CMD}(?:mkfs(?:\.[A-Za-z0-9]+)?|mke2fs|mkswap){END}"),
        ),
        (
            "dd-to-block-device",
            format!(r"{CMD}dd{ARG}of={BLOCK_DEV}"),
        ),
        (
            "fork-bomb",
            r"([A-Za-z_:.][A-Za-z0-9_:.]*)\s*\(\s*\)\s*\{\s*[A-Za-z_:.][A-Za-z0-9_:.]*\s*\|\s*&?\s*[A-Za-z_:.][A-Za-z0-9_:.]*\s*&\s*;?\s*\}".to_string(),
        ),
        (
            "overwrite-block-device",
            format!(r"(?:>>?\|?\s*|{CMD}(?:tee|shred|wipefs){ARG}){BLOCK_DEV}"),
        ),
        (
            "chmod-recursive-root",
            any_order("(?:chmod|chown|chgrp)", &[&[big_r, DANGER]]),
        ),
        (
            "windows-recursive-delete",
            r#"(?i)(?:^|[;&|]\s*)(?:(?:rd|rmdir|del|erase)\b[^;&|]*\s/s\b[^;&|]*\s|remove-item\b[^;&|]*-recurse\b[^;&|]*\s)"?[a-z]:\\?(?:\*(?:\.\*)?)?"?(?:$|[\s;&|])"#.to_string(),
        ),
        (
            "windows-format-volume",
            r"(?i)(?:(?:^|[;&|]\s*)format(?:\.com)?\s+[a-z]:|\bformat-volume\b|\bclear-disk\b)".to_string(),
        ),
        (
            "windows-disk-overwrite",
            r"(?i)\\\\\.\\physicaldrive[0-9]".to_string(),
        ),
        (
            "windows-fork-bomb",
            r"(?i)%0\s*\|\s*%0|\bstart\b[^;&|]*%0".to_string(),
        ),
    ];
    rules.into_iter().map(|(n, p)| (n.to_string(), p)).collect()
}

/// Compiled rules: their names, in order, and their matcher.
#[derive(Debug, Clone)]
struct CompiledRules {
    names: Vec<String>,
    matcher: Matcher,
}

/// The compiled patterns of [`CompiledRules::names`], index for index.
#[derive(Debug, Clone)]
enum Matcher {
    /// Every rule in one automaton: one scan of a candidate answers "does any rule match" (the
    /// usual answer being no), and on a hit which ones.
    Set(RegexSet),
    /// Each rule on its own: when the union passes the size limit that each rule alone keeps.
    OneByOne(Vec<Regex>),
}

impl CompiledRules {
    /// The index of the first rule that matches one of `candidates`.
    fn first_match(&self, candidates: &[String]) -> Option<usize> {
        match &self.matcher {
            Matcher::Set(set) => candidates
                .iter()
                .filter(|c| set.is_match(c))
                .filter_map(|c| set.matches(c).iter().next())
                .min(),
            Matcher::OneByOne(rules) => rules
                .iter()
                .position(|re| candidates.iter().any(|c| re.is_match(c))),
        }
    }
}

/// The default rules, compiled once per process on their first use (a process whose sessions
/// never run a shell tool never compiles them).
static DEFAULT_RULES: LazyLock<CompiledRules> = LazyLock::new(|| compile(default_rules()));

/// Which rules a policy applies.
#[derive(Debug, Clone)]
enum Rules {
    /// The default rules, none disabled: [`DEFAULT_RULES`].
    Default,
    /// Rules of a config, compiled when the config was read.
    Compiled(CompiledRules),
}

/// The compiled policy of a session.
#[derive(Debug, Clone)]
pub struct CommandPolicy {
    rules: Rules,
}

impl Default for CommandPolicy {
    /// The default rules, enabled (compiled on first use, once per process).
    fn default() -> Self {
        CommandPolicy {
            rules: Rules::Default,
        }
    }
}

/// Compiles `wanted`; a rule whose pattern does not compile is skipped with a warning naming it.
/// The rules become one [`RegexSet`]; each is compiled on its own only to find a bad one, or
/// when their union is too large for one set.
fn compile(wanted: Vec<(String, String)>) -> CompiledRules {
    if let Ok(set) = RegexSet::new(wanted.iter().map(|(_, p)| p)) {
        return CompiledRules {
            names: wanted.into_iter().map(|(name, _)| name).collect(),
            matcher: Matcher::Set(set),
        };
    }
    let (names, rules): (Vec<String>, Vec<Regex>) = wanted
        .into_iter()
        .filter_map(|(name, pattern)| match Regex::new(&pattern) {
            Ok(re) => Some((name, re)),
            Err(e) => {
                let e = e.to_string();
                let e = e
                    .lines()
                    .map(str::trim)
                    .rfind(|l| !l.is_empty())
                    .unwrap_or("");
                tracing::warn!("commands.policy: rule \"{name}\" skipped: bad regex: {e}");
                None
            }
        })
        .unzip();
    let matcher = match RegexSet::new(rules.iter().map(Regex::as_str)) {
        Ok(set) => Matcher::Set(set),
        Err(e) => {
            tracing::debug!("commands.policy: the rules are checked one by one: {e}");
            Matcher::OneByOne(rules)
        }
    };
    CompiledRules { names, matcher }
}

impl CommandPolicy {
    /// Compiles `config`. A rule whose pattern does not compile is skipped with a warning
    /// naming it; a disabled policy has no rules. The default rules with none disabled are
    /// the process-wide ones, compiled on first use.
    pub fn from_config(config: &PolicyConfig) -> Self {
        if !config.enabled {
            return CommandPolicy {
                rules: Rules::Compiled(compile(Vec::new())),
            };
        }
        if config.rules.is_none() && config.disable.is_empty() {
            return CommandPolicy::default();
        }
        let wanted: Vec<(String, String)> = match &config.rules {
            Some(rules) => rules
                .iter()
                .filter(|r| r.enabled)
                .map(|r| (r.name.clone(), r.pattern.clone()))
                .collect(),
            None => default_rules(),
        };
        let wanted = wanted
            .into_iter()
            .filter(|(name, _)| !config.disable.iter().any(|d| d == name))
            .collect();
        CommandPolicy {
            rules: Rules::Compiled(compile(wanted)),
        }
    }

    /// The active rules (the default ones compiled here on their first use).
    fn compiled(&self) -> &CompiledRules {
        match &self.rules {
            Rules::Default => &DEFAULT_RULES,
            Rules::Compiled(rules) => rules,
        }
    }

    /// Compiles the rules now if they are not yet (the default rules are compiled once per
    /// process, by the first check otherwise): for a caller that wants the compile outside a
    /// measured or latency-bound span.
    pub fn prepare(&self) {
        let _ = self.compiled();
    }

    /// Names of the active rules, in order.
    pub fn rule_names(&self) -> Vec<&str> {
        self.compiled().names.iter().map(String::as_str).collect()
    }

    /// The name of the first rule that forbids the shell text `command`.
    pub fn check(&self, command: &str) -> Option<&str> {
        let rules = self.compiled();
        if rules.names.is_empty() {
            return None;
        }
        let candidates = shell_words::candidates(command);
        rules
            .first_match(&candidates)
            .and_then(|i| rules.names.get(i))
            .map(String::as_str)
    }

    /// The rule that forbids a call of the tool `definition` defines with `arguments` (the JSON
    /// text the model sent), for a shell tool (one whose definition declares its
    /// `command_argument`); `None` for other tools, a lone Ctrl-C sent as input and unparsable
    /// arguments (the tool itself rejects those).
    pub fn check_call(&self, definition: &ToolDefinitionConfig, arguments: &str) -> Option<&str> {
        let text = shell_text(definition, arguments)?;
        self.check(&text)
    }
}

/// The shell text of a call of the tool `definition` defines: the argument its definition
/// declares (`command_argument`), if it is a string and not a lone Ctrl-C sent as input.
pub fn shell_text(definition: &ToolDefinitionConfig, arguments: &str) -> Option<String> {
    let argument = definition.command_argument?;
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let text = args.get(argument.name())?.as_str()?;
    if matches!(argument, CommandArgument::Stdin(_)) && text == "\u{3}" {
        return None;
    }
    Some(text.to_string())
}

#[cfg(test)]
#[path = "command_policy_tests.rs"]
mod tests;
