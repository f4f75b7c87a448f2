//! What a project file (`.rookery/config.yaml`, written by whoever controls the repository)
//! may not set: keys that run commands or start servers, send the user's API key elsewhere,
//! let secrets into commands, or loosen the command policy, the approval rules or the sandbox
//! of the layers below it. Such a key is refused with an error naming the file and the key;
//! the same file passed with `--config FILE` (the user vouching for it) is not checked.
//!
//! It compares YAML trees only; it never reads files or builds the config.

use std::path::Path;

use serde_yaml::{Mapping, Value};

use super::ConfigError;
use super::layers::{get, key_text};

/// Keys a project file may never set, and why.
const REFUSED: &[(&[&str], &str)] = &[
    (&["hooks"], "hooks run commands"),
    (&["tools", "mcpServers"], "MCP servers start programs"),
    (
        &["model", "base_url"],
        "it would send your API key to the server it names",
    ),
    (
        &["model", "api_key_env"],
        "it chooses which of your secrets is sent to the model",
    ),
    (
        &["commands", "pass_env"],
        "it lets your secrets into the session's commands",
    ),
    (
        &["commands", "policy"],
        "it can turn the command policy off",
    ),
    (&["sandbox", "writable_roots"], "it widens the sandbox"),
    (&["sandbox", "allow_escalation"], "it widens the sandbox"),
];

/// Permission lists a project file may set (rules that only ask or deny more).
const PERMISSION_LISTS: &[&str] = &["deny", "ask"];

/// Lists a project file may replace only by keeping every entry of the layers below.
const KEPT_LISTS: &[(&[&str], &str)] = &[
    (
        &["commands", "strip_env"],
        "it would let stripped variables through",
    ),
    (
        &["sandbox", "deny_read"],
        "it would make denied paths readable",
    ),
    (&["permissions", "deny"], "it would drop your deny rules"),
    (&["permissions", "ask"], "it would drop your ask rules"),
];

/// The name of a `tools.builtin` entry (`read_file`, or `{name: read_file, …}`).
fn tool_name(entry: &Value) -> Option<&str> {
    entry
        .as_str()
        .or_else(|| entry.get("name").and_then(Value::as_str))
}

/// Refuses what `project` (the project file at `path`) may not set over `below` (the defaults
/// and the user file merged).
pub fn check(path: &Path, project: &Value, below: &Mapping) -> Result<(), ConfigError> {
    let Value::Mapping(tree) = project else {
        return Ok(());
    };
    let refuse = |key: String, reason: &str| ConfigError::ProjectKey {
        path: path.to_path_buf(),
        key,
        reason: reason.to_string(),
    };
    for (key, reason) in REFUSED {
        if get(tree, key).is_some() {
            return Err(refuse(key.join("."), reason));
        }
    }
    if let Some(Value::Mapping(models)) = tree.get("models") {
        for (name, model) in models {
            for field in ["base_url", "api_key_env"] {
                if model.as_mapping().is_some_and(|m| m.contains_key(field)) {
                    return Err(refuse(
                        format!("models.{}.{field}", key_text(name)),
                        "it would send your API key to a server of the repository's choosing",
                    ));
                }
            }
        }
    }
    if let Some(Value::Mapping(perms)) = tree.get("permissions") {
        for (name, _) in perms {
            let name = key_text(name);
            if !PERMISSION_LISTS.contains(&name.as_str()) {
                return Err(refuse(
                    format!("permissions.{name}"),
                    "only deny and ask rules may come from a project",
                ));
            }
        }
    }
    for (key, reason) in KEPT_LISTS {
        if let Some(list) = get(tree, key) {
            let theirs = list.as_sequence().cloned().unwrap_or_default();
            let dropped = get(below, key)
                .and_then(Value::as_sequence)
                .is_some_and(|ours| ours.iter().any(|v| !theirs.contains(v)));
            if dropped {
                return Err(refuse(key.join("."), reason));
            }
        }
    }
    // A tool list of your own may be narrowed by a project, not widened.
    if let (Some(theirs), Some(ours)) = (
        get(tree, &["tools", "builtin"]).and_then(Value::as_sequence),
        get(below, &["tools", "builtin"]).and_then(Value::as_sequence),
    ) {
        let allowed: Vec<&str> = ours.iter().filter_map(tool_name).collect();
        if let Some(extra) = theirs
            .iter()
            .filter_map(tool_name)
            .find(|t| !allowed.contains(t))
        {
            return Err(refuse(
                "tools.builtin".into(),
                &format!("it would add {extra}, which your own tools.builtin leaves out"),
            ));
        }
    }
    check_sandbox(tree, below).map_err(|reason| refuse("sandbox".into(), reason))
}

/// How tight a sandbox mode is (higher: tighter); unknown modes are left to the schema check.
fn tightness(mode: &str) -> Option<u8> {
    match mode {
        "off" => Some(0),
        "workspace-write" => Some(1),
        "read-only" => Some(2),
        _ => None,
    }
}

fn text<'a>(tree: &'a Mapping, path: &[&str], default: &'a str) -> &'a str {
    get(tree, path).and_then(Value::as_str).unwrap_or(default)
}

/// The project's `sandbox.mode` and `sandbox.network` must not loosen the layers below.
fn check_sandbox(tree: &Mapping, below: &Mapping) -> Result<(), &'static str> {
    if get(tree, &["sandbox"]).is_none() {
        return Ok(());
    }
    let old_mode = text(below, &["sandbox", "mode"], "off");
    let new_mode = text(tree, &["sandbox", "mode"], old_mode);
    let old_net = text(below, &["sandbox", "network"], "off");
    let new_net = text(tree, &["sandbox", "network"], old_net);
    if let (Some(old), Some(new)) = (tightness(old_mode), tightness(new_mode))
        && new < old
    {
        return Err("sandbox.mode would be looser than your own config's");
    }
    let confined_before = old_mode != "off";
    if confined_before && new_net == "on" && old_net != "on" {
        return Err("sandbox.network would open the network your own config closes");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(text: &str) -> Mapping {
        serde_yaml::from_str(text).unwrap()
    }

    fn verdict(project: &str, below: &str) -> Result<(), String> {
        let project: Value = serde_yaml::from_str(project).unwrap();
        check(Path::new("/r/.rookery/config.yaml"), &project, &map(below))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn keys_that_run_things_or_leak_the_key_are_refused() {
        for (project, key) in [
            ("hooks: {}", "hooks"),
            ("tools: {mcpServers: []}", "tools.mcpServers"),
            ("model: {base_url: 'http://evil'}", "model.base_url"),
            (
                "models: {m: {provider: openai, base_url: 'http://evil'}}",
                "models.m.base_url",
            ),
            ("commands: {pass_env: [X]}", "commands.pass_env"),
            ("permissions: {allow: ['Bash']}", "permissions.allow"),
        ] {
            let e = verdict(project, "{}").unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "project config /r/.rookery/config.yaml may not set {key}"
                )),
                "{project}: {e}"
            );
        }
        assert_eq!(
            verdict(
                "model: {model: m}\npermissions: {deny: ['Bash']}\nmax_turns: 3",
                "{}"
            ),
            Ok(())
        );
    }

    #[test]
    fn the_sandbox_and_the_kept_lists_may_only_tighten() {
        assert_eq!(verdict("sandbox: {mode: read-only}", "{}"), Ok(()));
        assert_eq!(verdict("sandbox: {mode: off}", "{}"), Ok(()));
        assert!(verdict("sandbox: {mode: off}", "sandbox: {mode: read-only}").is_err());
        assert!(
            verdict(
                "sandbox: {mode: workspace-write}",
                "sandbox: {mode: read-only}"
            )
            .is_err()
        );
        assert!(verdict("sandbox: {network: on}", "sandbox: {mode: read-only}").is_err());
        assert_eq!(
            verdict("sandbox: {mode: read-only, network: on}", "{}"),
            Ok(())
        );
        assert!(verdict("commands: {strip_env: [A]}", "commands: {strip_env: [B]}").is_err());
        assert!(verdict("permissions: {deny: [A]}", "permissions: {deny: [B]}").is_err());
        let ours = "tools: {builtin: [read_file, {name: grep}]}";
        assert_eq!(verdict("tools: {builtin: [grep]}", ours), Ok(()));
        let e = verdict("tools: {builtin: [grep, exec_command]}", ours).unwrap_err();
        assert!(
            e.contains("tools.builtin: it would add exec_command"),
            "{e}"
        );
        assert_eq!(verdict("tools: {builtin: [exec_command]}", "{}"), Ok(()));
        assert_eq!(
            verdict(
                "commands: {strip_env: [B, A]}",
                "commands: {strip_env: [B]}"
            ),
            Ok(())
        );
    }
}
