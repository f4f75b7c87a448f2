//! `ConfigError`: why an agent config or a start-up setting cannot be used. It wraps the errors
//! of the areas the config assembles (model set-up, tool profiles, hooks, MCP servers); those
//! areas return their own errors and never this one.
//!
//! Texts name what is wrong in the library's terms (`tools.max_parallel`, a path); they never
//! name a command-line flag: the CLI maps the variants it has flags for to its own wording
//! (`cli/error.rs`).

use std::path::PathBuf;

use crate::model::error::ModelSetupError;

/// A configuration or start-up error: the CLI prints it on one line and exits 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A config file whose content is wrong: the file and what is wrong with it.
    #[error("invalid config {path}: {message}")]
    InvalidConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The config merged from several layers is wrong (each file alone was well-formed).
    #[error("invalid config (merged from {layers}): {message}")]
    InvalidMerged {
        /// The layers merged, lowest first.
        layers: String,
        /// What is wrong.
        message: String,
    },
    /// A `ROOKERY_*` variable whose value the config cannot take.
    #[error("environment variable {name}: {message}")]
    EnvVar {
        /// The variable.
        name: String,
        /// What is wrong with its value.
        message: String,
    },
    /// A project file setting a key only the user may set.
    #[error(
        "project config {path} may not set {key}: {reason} (move it to your user config, or name the file explicitly to vouch for it)"
    )]
    ProjectKey {
        /// The project file.
        path: PathBuf,
        /// The key, dotted.
        key: String,
        /// Why a project may not set it.
        reason: String,
    },
    /// The workspace does not exist or is not a directory.
    #[error("workspace {0} does not exist or is not a directory")]
    Workspace(PathBuf),
    /// A config text that is not the config's YAML.
    #[error("{0}")]
    Yaml(#[source] serde_yaml::Error),
    /// `tools.max_parallel` below 1.
    #[error("tools.max_parallel must be a whole number of at least 1 (got {0})")]
    BadMaxParallel(i64),
    /// `compaction.max_context` below 1.
    #[error("compaction.max_context must be a whole number of at least 1 (got {0})")]
    BadMaxContext(i64),
    /// A `models.<name>` section that is not a valid model section.
    #[error("models.{name}: {source}")]
    NamedModel {
        /// The model's name under `models:`.
        name: String,
        /// Why the section cannot be used.
        #[source]
        source: ModelSetupError,
    },
    /// A `models.<name>` of the scripted provider.
    #[error(
        "models.{0}: provider scripted cannot be named (a scripted session's children use its script)"
    )]
    NamedScripted(String),
    /// `agents.<name>.model` naming no `models:` entry.
    #[error("agents.{agent}.model: unknown model \"{model}\" (configured models: {known})")]
    AgentModel {
        /// The agent's name.
        agent: String,
        /// The model it names.
        model: String,
        /// The configured models, listed.
        known: String,
    },
    /// `agents.<name>.tools` naming no tool.
    #[error("agents.{agent}.tools: unknown tool \"{tool}\"")]
    AgentTool {
        /// The agent's name.
        agent: String,
        /// The tool it names.
        tool: String,
    },
    /// A model that cannot be set up.
    #[error(transparent)]
    Model(#[from] ModelSetupError),
    /// A hooks file that cannot be used.
    #[error(transparent)]
    Hooks(#[from] crate::hooks::HookConfigError),
    /// An MCP server configuration that cannot be used.
    #[error(transparent)]
    Mcp(#[from] crate::mcp::McpConfigError),
    /// A `permissions` section that cannot be used.
    #[error(transparent)]
    Permissions(#[from] crate::approval::permission_rules::PermissionRuleError),
    /// A tool profile that cannot be used.
    #[error(transparent)]
    Profile(#[from] crate::tools::profile::ProfileError),
}

impl ConfigError {
    /// Whether this error is about the content of a config text (its YAML, its `model:`,
    /// `models:` and `agents:` sections, `tools.max_parallel`): read from a file, the file
    /// names it ([`ConfigError::InvalidConfig`]).
    pub(crate) fn is_about_content(&self) -> bool {
        matches!(
            self,
            ConfigError::Yaml(_)
                | ConfigError::BadMaxParallel(_)
                | ConfigError::NamedModel { .. }
                | ConfigError::NamedScripted(_)
                | ConfigError::AgentModel { .. }
                | ConfigError::AgentTool { .. }
                | ConfigError::Model(_)
                | ConfigError::Permissions(_)
        )
    }
}
