//! `--settings FILE`: a Claude Code `settings.json` as a user already has it. Its `hooks` run
//! (in Claude Code's view of the calls) besides the agent config's; its `permissions` are
//! permission rules; every other key (`env`, `model`, …) is ignored with a warning naming it.
//!
//! It reads and splits the file; hooks and rules are parsed by their own areas.

use std::path::Path;

use serde_json::Value;

use super::error::ConfigError;
use crate::approval::permission_rules::PermissionRules;
use crate::hooks::{HookView, HooksConfig};

/// The parts of a settings file Rookery uses.
#[derive(Debug, Default)]
pub struct Settings {
    /// Its `hooks`, seen in Claude Code's view.
    pub hooks: HooksConfig,
    /// Its `permissions` rules.
    pub permissions: PermissionRules,
}

/// The keys of a settings file Rookery reads.
const KNOWN: [&str; 2] = ["hooks", "permissions"];

impl Settings {
    /// Reads `path` (JSON).
    pub fn from_file(path: &Path) -> Result<Settings, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |message: String| ConfigError::InvalidConfig {
            path: path.to_path_buf(),
            message,
        };
        let value: Value =
            serde_json::from_str(&text).map_err(|e| invalid(format!("not JSON: {e}")))?;
        let Value::Object(mut map) = value else {
            return Err(invalid("a settings file is a JSON object".into()));
        };
        let ignored: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !KNOWN.contains(k))
            .collect();
        if !ignored.is_empty() {
            tracing::warn!(
                "settings {}: keys ignored (Rookery reads only hooks and permissions): {}",
                path.display(),
                ignored.join(", ")
            );
        }
        let hooks = match map.remove("hooks") {
            None | Some(Value::Null) => HooksConfig::default(),
            Some(h) => HooksConfig::from_value(h, HookView::ClaudeCode)
                .map_err(|e| invalid(e.to_string()))?,
        };
        let permissions = match map.remove("permissions") {
            None | Some(Value::Null) => PermissionRules::default(),
            Some(p) => PermissionRules::from_value(&p).map_err(|e| invalid(e.to_string()))?,
        };
        Ok(Settings { hooks, permissions })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_permissions_and_other_keys() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("settings.json");
        std::fs::write(
            &p,
            r#"{"model": "x", "env": {}, "permissions": {"allow": ["Bash(ls)"]},
                "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}]}}"#,
        )
        .unwrap();
        let s = Settings::from_file(&p).unwrap();
        let hooks = s.hooks.matching(
            crate::hooks::HookEvent::PreToolUse,
            "exec_command",
            Some("Bash"),
        );
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0].view, HookView::ClaudeCode);
        assert!(!s.permissions.is_empty());
        std::fs::write(&p, "[1]").unwrap();
        let e = Settings::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("settings.json"), "{e}");
        std::fs::write(&p, r#"{"hooks": {"PreToolUse": 3}}"#).unwrap();
        assert!(Settings::from_file(&p).is_err());
    }
}
