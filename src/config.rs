//! The agent config file (YAML, `--config FILE`, or the discovered user and project files):
//! system prompt, `max_turns`, the reconnect policy and the `tools.builtin` list that replaces
//! the default tool set wholesale. The layers and their merge live in `layers.rs`,
//! `discovery.rs`, `env_layer.rs`, `project_trust.rs` and `loader.rs`.
//!
//! This module parses and validates; it does not start anything.

use std::path::Path;

use serde::Deserialize;

pub mod catalog;
pub mod error;

use crate::model::model_config::ModelConfig;
use crate::tools::ToolRegistry;
use crate::tools::profile::penguin::{self, image_tools};
use crate::tools::profile::{self, LocalToolOptions, ProfileError, ToolProfile};
use crate::tools::registry::BuiltinEntry;
pub use error::ConfigError;

pub mod compaction;
pub mod discovery;
pub mod env_layer;
pub mod idle_reap;
pub mod layers;
pub mod loader;
pub mod project_trust;
pub mod settings;
pub mod show;

pub use compaction::{CompactionConfig, CompactionMode};

/// The default system prompt of a session.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a careful software agent working in the user's workspace. \
Use the tools to inspect and change files and run commands; answer without tools when the task is done.";

/// Reconnect policy for `failed | timeout | malformed` model errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// Reconnects after the first attempt (default 5, so at most 6 attempts).
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Backoff before retry n is `min(base_ms · 2^(n−1), cap_ms)`.
    #[serde(default = "default_base_ms")]
    pub base_ms: u64,
    /// The longest backoff, in milliseconds (default 30000).
    #[serde(default = "default_cap_ms")]
    pub cap_ms: u64,
}

fn default_max_retries() -> u32 {
    5
}
fn default_base_ms() -> u64 {
    2000
}
fn default_cap_ms() -> u64 {
    30_000
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: default_max_retries(),
            base_ms: default_base_ms(),
            cap_ms: default_cap_ms(),
        }
    }
}

impl RetryPolicy {
    /// Backoff before retry `n` (1-based).
    pub fn backoff_ms(&self, n: u32) -> u64 {
        let shift = n.saturating_sub(1).min(30);
        self.base_ms.saturating_mul(1u64 << shift).min(self.cap_ms)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsSection {
    builtin: Option<Vec<BuiltinEntry>>,
    max_parallel: Option<i64>,
    /// `tools.mcpServers: [{name, config}]` (validated by `crate::mcp::config`).
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<serde_json::Value>,
    /// `penguin` (default) or `openvaala`.
    profile: Option<String>,
    /// Images read by the openvaala read_file over this size are re-encoded (default 500).
    max_image_kb: Option<u64>,
}

/// The `commands:` section: what the session's shell commands inherit from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandsConfig {
    /// Glob patterns (case-insensitive) of variables stripped, besides the defaults.
    #[serde(default)]
    pub strip_env: Vec<String>,
    /// Patterns let through despite `strip_env` (never the provider key or the serve token).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// `policy:` the command policy (`forbidden` rules of the shell tools).
    #[serde(default)]
    pub policy: crate::approval::command_policy::PolicyConfig,
    /// `idle_reap:` registered commands untouched this long are stopped and removed.
    #[serde(default)]
    pub idle_reap: idle_reap::IdleReap,
}

/// Default of `hooks_max_stop_continuations`: Stop hooks make one task go on at most this
/// many times.
pub const DEFAULT_MAX_STOP_CONTINUATIONS: u32 = 5;

/// Default of `tools.max_parallel`: tool calls of one session that run at once.
pub const DEFAULT_MAX_PARALLEL: usize = 16;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgentConfig {
    system_prompt: Option<String>,
    max_turns: Option<i64>,
    retry: Option<RetryPolicy>,
    tools: Option<ToolsSection>,
    model: Option<ModelConfig>,
    commands: Option<CommandsConfig>,
    hooks: Option<crate::hooks::HooksConfig>,
    hooks_max_stop_continuations: Option<u32>,
    permissions: Option<serde_json::Value>,
    compaction: Option<compaction::RawCompaction>,
    models: Option<std::collections::BTreeMap<String, ModelConfig>>,
    agents: Option<std::collections::BTreeMap<String, catalog::AgentSpec>>,
    sandbox: Option<crate::sandbox::SandboxPolicy>,
}

/// Checks a config text against the schema alone (its keys and their types; no cross-checks
/// between sections), so an error can name the one file it is in, with its line. A `model:`
/// (or `models.<name>`) section may leave `provider` to another layer.
pub(crate) fn check_schema(text: &str) -> Result<(), serde_yaml::Error> {
    if text.trim().is_empty() {
        return Ok(());
    }
    let first = match serde_yaml::from_str::<Option<RawAgentConfig>>(text) {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    let Ok(value) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Err(first);
    };
    match check_schema_value(&value) {
        Ok(()) => Ok(()),
        // serde's own error carries the line; the provider filled in made the second one.
        Err(second) if first.to_string().contains("provider is missing") => Err(second),
        Err(_) => Err(first),
    }
}

/// [`check_schema`] of a tree.
pub(crate) fn check_schema_value(value: &serde_yaml::Value) -> Result<(), serde_yaml::Error> {
    let mut value = value.clone();
    let placeholder = || serde_yaml::Value::String("openai".into());
    if let Some(serde_yaml::Value::Mapping(m)) = value.get_mut("model")
        && !m.contains_key("provider")
    {
        m.insert("provider".into(), placeholder());
    }
    if let Some(serde_yaml::Value::Mapping(models)) = value.get_mut("models") {
        for (_, model) in models.iter_mut() {
            if let serde_yaml::Value::Mapping(m) = model
                && !m.contains_key("provider")
            {
                m.insert("provider".into(), placeholder());
            }
        }
    }
    serde_yaml::from_value::<Option<RawAgentConfig>>(value).map(|_| ())
}

/// A validated agent config.
#[derive(Clone)]
pub struct AgentConfig {
    /// The system prompt of the agent's sessions.
    pub system_prompt: String,
    /// `<= 0` = unlimited (the default).
    pub max_turns: i64,
    /// How model errors are retried.
    pub retry: RetryPolicy,
    /// The tools the agent's sessions offer.
    pub tools: ToolRegistry,
    /// `tools.max_parallel`: at most this many tool calls of one session run at once (>= 1).
    pub max_parallel: usize,
    /// The `model:` section, when the file has one.
    pub model: Option<ModelConfig>,
    /// The `commands:` section (environment stripping, the command policy).
    pub commands: CommandsConfig,
    /// `commands.policy`, compiled.
    pub command_policy: std::sync::Arc<crate::approval::command_policy::CommandPolicy>,
    /// The `hooks:` section (every Claude Code hook event), merged with `--hooks FILE` and
    /// `--settings FILE`.
    pub hooks: std::sync::Arc<crate::hooks::HooksConfig>,
    /// `hooks_max_stop_continuations`: how many times Stop hooks may make one task go on
    /// (default [`DEFAULT_MAX_STOP_CONTINUATIONS`]).
    pub hooks_max_stop_continuations: u32,
    /// `permissions:` (Claude Code's allow / deny / ask rules), merged with `--settings FILE`.
    pub permissions: std::sync::Arc<crate::approval::permission_rules::PermissionRules>,
    /// `tools.mcpServers` plus `--mcp-config FILE`: the MCP servers each session connects to.
    pub mcp_servers: std::sync::Arc<Vec<crate::mcp::McpServerConfig>>,
    /// The `compaction:` section (thresholds and mode).
    pub compaction: CompactionConfig,
    /// `tools.profile`: the tool surface of the sessions (`tools::profile`).
    pub profile: ToolProfile,
    /// `tools.max_image_kb` (default 500).
    pub max_image_kb: u64,
    /// `tools.builtin` as written, to re-assemble the tools for another model.
    builtin: Option<Vec<BuiltinEntry>>,
    /// `models:` and `agents:` (named models and agents for the subagent tools).
    pub catalog: std::sync::Arc<catalog::Catalog>,
    /// `sandbox:` what the sessions' processes and file tools may touch (default `off`;
    /// `--sandbox` and the API's `sandbox` override the mode and network).
    pub sandbox: crate::sandbox::SandboxPolicy,
}

/// The default tool set (the builtins and the scripted model's image tool), built once per
/// process: every [`AgentConfig::default`] (one per `SessionOptions::new`, so one per session)
/// shares its definitions and its tool JSON instead of rebuilding the table, which cost a
/// session about as many instructions as two of its tool calls.
fn default_tools() -> ToolRegistry {
    static DEFAULT: std::sync::LazyLock<ToolRegistry> = std::sync::LazyLock::new(|| {
        penguin::assemble(None, image_tools(&ModelConfig::scripted()))
            .unwrap_or_else(|_| penguin::builtin_registry())
    });
    DEFAULT.clone()
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
            max_turns: -1,
            retry: RetryPolicy::default(),
            tools: default_tools(),
            max_parallel: DEFAULT_MAX_PARALLEL,
            model: None,
            commands: CommandsConfig::default(),
            command_policy: Default::default(),
            hooks: Default::default(),
            hooks_max_stop_continuations: DEFAULT_MAX_STOP_CONTINUATIONS,
            permissions: Default::default(),
            mcp_servers: Default::default(),
            compaction: CompactionConfig::default(),
            profile: ToolProfile::Penguin,
            max_image_kb: profile::openvaala::read_file::DEFAULT_MAX_IMAGE_KB,
            builtin: None,
            catalog: Default::default(),
            sandbox: Default::default(),
        }
    }
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("max_turns", &self.max_turns)
            .field("max_parallel", &self.max_parallel)
            .field("retry", &self.retry)
            .field("tools", &self.tools.names())
            .finish()
    }
}

impl AgentConfig {
    /// Reads and validates a YAML config file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text).map_err(|e| {
            if e.is_about_content() {
                ConfigError::InvalidConfig {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                }
            } else {
                e
            }
        })
    }

    /// Parses a YAML config text. An empty document is the default config.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let raw: RawAgentConfig = if text.trim().is_empty() {
            RawAgentConfig::default()
        } else {
            serde_yaml::from_str(text).map_err(ConfigError::Yaml)?
        };
        let mut cfg = AgentConfig::default();
        if let Some(p) = raw.system_prompt {
            cfg.system_prompt = p;
        }
        if let Some(m) = raw.max_turns {
            cfg.max_turns = m;
        }
        if let Some(r) = raw.retry {
            cfg.retry = r;
        }
        cfg.commands = raw.commands.unwrap_or_default();
        cfg.command_policy = std::sync::Arc::new(
            crate::approval::command_policy::CommandPolicy::from_config(&cfg.commands.policy),
        );
        cfg.hooks = std::sync::Arc::new(raw.hooks.unwrap_or_default());
        if let Some(n) = raw.hooks_max_stop_continuations {
            cfg.hooks_max_stop_continuations = n;
        }
        if let Some(p) = &raw.permissions {
            cfg.permissions = std::sync::Arc::new(
                crate::approval::permission_rules::PermissionRules::from_value(p)?,
            );
        }
        if let Some(c) = raw.compaction {
            cfg.compaction = CompactionConfig::from_raw(c)?;
        }
        let named = catalog::Catalog {
            models: raw.models.unwrap_or_default(),
            agents: raw.agents.unwrap_or_default(),
        };
        named.validate(|t| {
            penguin::BUILTIN_NAMES.contains(&t) || catalog::COLLABORATION_TOOLS.contains(&t)
        })?;
        cfg.catalog = std::sync::Arc::new(named);
        cfg.sandbox = raw.sandbox.unwrap_or_default();
        let tools = raw.tools.unwrap_or_default();
        cfg.builtin = tools.builtin;
        if let Some(list) = &tools.mcp_servers {
            cfg.mcp_servers = std::sync::Arc::new(crate::mcp::config::from_servers_list(list)?);
        }
        if let Some(p) = &tools.profile {
            cfg.profile = p.parse().map_err(ProfileError::from)?;
        }
        if let Some(kb) = tools.max_image_kb {
            cfg.max_image_kb = kb.max(1);
        }
        if let Some(n) = tools.max_parallel {
            cfg.max_parallel = usize::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or(ConfigError::BadMaxParallel(n))?;
        }
        if let Some(m) = &raw.model {
            // base_url and model may come from --base-url / --model; the merged model is
            // validated in full when it is built.
            m.validate_section()?;
        }
        let model = raw.model.clone().unwrap_or_else(ModelConfig::scripted);
        cfg.model = raw.model;
        cfg.tools = cfg.assemble_tools(&model)?;
        Ok(cfg)
    }

    /// Adds the servers of a `.mcp.json` (`--mcp-config FILE`); a name configured twice is an
    /// error.
    pub fn add_mcp_config(&mut self, path: &Path) -> Result<(), ConfigError> {
        let more = crate::mcp::config::from_file(path)?;
        crate::mcp::config::merge(std::sync::Arc::make_mut(&mut self.mcp_servers), more)?;
        Ok(())
    }

    /// The tools of `self.profile` for `model` (`tools::profile::assemble`).
    fn assemble_tools(&self, model: &ModelConfig) -> Result<ToolRegistry, ConfigError> {
        let bound = match self.profile {
            ToolProfile::Penguin => image_tools(model),
            // The command and collaboration tools are bound to the session's supervisors by the
            // profile.
            ToolProfile::OpenVaala => Vec::new(),
        };
        let opts = LocalToolOptions {
            vision: model.vision,
            max_image_kb: self.max_image_kb,
        };
        Ok(profile::assemble(
            self.profile,
            self.builtin.as_deref(),
            bound,
            opts,
        )?)
    }

    /// Switches the sessions to another tool profile (a flag or an API field overriding
    /// `tools.profile`) and re-assembles the tools; `tools.builtin` must fit the new profile.
    pub fn set_profile(&mut self, profile: ToolProfile) -> Result<(), ConfigError> {
        let model = self.model.clone().unwrap_or_else(ModelConfig::scripted);
        let previous = std::mem::replace(&mut self.profile, profile);
        match self.assemble_tools(&model) {
            Ok(tools) => {
                self.tools = tools;
                Ok(())
            }
            Err(e) => {
                self.profile = previous;
                Err(e)
            }
        }
    }

    /// Sets the model the sessions will use and re-assembles the tools for it (the image tool
    /// follows the model's `vision` flag). Tools registered by hand are dropped.
    pub fn set_model(&mut self, model: ModelConfig) -> Result<(), ConfigError> {
        self.tools = self.assemble_tools(&model)?;
        self.model = Some(model);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_ladder() {
        let r = RetryPolicy::default();
        let ladder: Vec<u64> = (1..=6).map(|n| r.backoff_ms(n)).collect();
        assert_eq!(ladder, vec![2000, 4000, 8000, 16000, 30000, 30000]);
    }

    #[test]
    fn builtin_list_replaces_defaults() {
        let cfg = AgentConfig::from_yaml(
            "system_prompt: hi\nmax_turns: 3\ntools:\n  builtin:\n    - read_file\n    - name: write_file\n      timeoutMs: 5\n",
        );
        let cfg = match cfg {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(cfg.tools.names(), vec!["read_file", "write_file"]);
        assert_eq!(
            cfg.tools.get("write_file").map(|t| t.definition.timeout_ms),
            Some(5)
        );
        assert_eq!(cfg.max_turns, 3);
        assert_eq!(cfg.system_prompt, "hi");
    }

    #[test]
    fn unknown_tool_and_unknown_key_are_errors() {
        let e = AgentConfig::from_yaml("tools:\n  builtin: [read_fiel]\n")
            .err()
            .map(|e| e.to_string());
        assert!(e.unwrap_or_default().contains("read_fiel"));
        let cfg =
            AgentConfig::from_yaml("commands:\n  strip_env: [X_*]\n  pass_env: [GITHUB_TOKEN]\n");
        assert_eq!(
            cfg.map(|c| c.commands).ok(),
            Some(CommandsConfig {
                strip_env: vec!["X_*".into()],
                pass_env: vec!["GITHUB_TOKEN".into()],
                ..CommandsConfig::default()
            })
        );
        let e = AgentConfig::from_yaml("commands:\n  strip: [A]\n")
            .err()
            .map(|e| e.to_string());
        assert!(e.unwrap_or_default().contains("strip"));
        let e = AgentConfig::from_yaml("max_turn: 3\n")
            .err()
            .map(|e| e.to_string());
        assert!(e.unwrap_or_default().contains("max_turn"));
    }

    #[test]
    fn an_unknown_key_in_a_builtin_entry_names_the_key_and_the_tool() {
        let e = AgentConfig::from_yaml(
            "tools:\n  builtin:\n    - read_file\n    - name: write_file\n      timeoutMS: 5\n",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            e.contains("unknown key \"timeoutMS\" in the tools.builtin entry of \"write_file\""),
            "{e}"
        );
        let e = AgentConfig::from_yaml(
            "tools:\n  builtin:\n    - name: write_file\n      timeoutMs: soon\n",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("tools.builtin entry of \"write_file\""), "{e}");
    }

    #[test]
    fn mcp_servers_are_read_and_validated() {
        let cfg = AgentConfig::from_yaml(
            "tools:\n  mcpServers:\n    - name: every\n      config:\n        command: node\n        args: [x.js]\n        timeoutMs: 5\n",
        )
        .unwrap();
        assert_eq!(cfg.mcp_servers.len(), 1);
        assert_eq!(cfg.mcp_servers[0].timeout_ms, 5);
        let e = AgentConfig::from_yaml("tools:\n  mcpServers:\n    - name: x\n      config: {}\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("MCP server \"x\""), "{e}");
    }

    #[test]
    fn the_sandbox_section_is_read_and_validated() {
        use crate::sandbox::{NetworkAccess, SandboxMode};
        assert!(AgentConfig::default().sandbox.is_off());
        let cfg = AgentConfig::from_yaml(
            "sandbox:\n  mode: workspace-write\n  network: on\n  writable_roots: [/srv/out]\n  deny_read: [secrets]\n  allow_escalation: true\n",
        )
        .unwrap();
        assert_eq!(cfg.sandbox.mode, SandboxMode::WorkspaceWrite);
        assert_eq!(cfg.sandbox.network, NetworkAccess::On);
        assert_eq!(
            cfg.sandbox.writable_roots,
            vec![std::path::PathBuf::from("/srv/out")]
        );
        assert_eq!(
            cfg.sandbox.deny_read,
            vec![std::path::PathBuf::from("secrets")]
        );
        assert!(cfg.sandbox.allow_escalation);
        for bad in ["sandbox:\n  mode: loose\n", "sandbox:\n  mood: off\n"] {
            let e = AgentConfig::from_yaml(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains("sandbox"), "{e}");
        }
    }

    #[test]
    fn max_parallel_defaults_and_validates() {
        assert_eq!(AgentConfig::default().max_parallel, 16);
        let cfg = AgentConfig::from_yaml("tools:\n  max_parallel: 4\n").unwrap();
        assert_eq!(cfg.max_parallel, 4);
        for bad in ["0", "-3"] {
            let e = AgentConfig::from_yaml(&format!("tools:\n  max_parallel: {bad}\n"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains("tools.max_parallel must be"), "{e}");
        }
        let e = AgentConfig::from_yaml("tools:\n  max_paralel: 4\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("max_paralel"), "{e}");
    }
}
