//! The `compaction:` section of the agent config: whether a session compacts by itself
//! (`auto`), when (`max_context`, `max_turns`) and how (`mode: summarize | discard`).
//!
//! This module parses and validates the section and computes the usage threshold; it does not
//! compact anything (that is `actors/session/compaction.rs`).

use serde::Deserialize;

use super::ConfigError;

/// Default of `compaction.max_context` (tokens of one request).
pub const DEFAULT_MAX_CONTEXT: u64 = 256_000;

/// The context window assumed when the model names none.
pub const UNKNOWN_CONTEXT_WINDOW: u64 = 128_000;

/// Room kept free below the model's context window.
pub const WINDOW_RESERVE: u64 = 2048;

/// How a session compacts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionMode {
    /// Ask the model for a summary; the new context starts with it.
    #[default]
    Summarize,
    /// Drop the old context; keep only the pending input.
    Discard,
}

impl CompactionMode {
    /// The mode's name in the config and in `compaction_*` events.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionMode::Summarize => "summarize",
            CompactionMode::Discard => "discard",
        }
    }
}

/// The section as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCompaction {
    auto: Option<bool>,
    max_context: Option<i64>,
    max_turns: Option<i64>,
    mode: Option<CompactionMode>,
}

/// The validated `compaction:` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionConfig {
    /// Whether the usage and turn triggers compact (`false`: only a manual compaction does).
    pub auto: bool,
    /// A request whose `total` tokens reach `min(max_context, window − 2048)` compacts.
    pub max_context: u64,
    /// Completed model turns since the last compaction that trigger one (`None`: off).
    pub max_turns: Option<u64>,
    /// How to compact.
    pub mode: CompactionMode,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            auto: true,
            max_context: DEFAULT_MAX_CONTEXT,
            max_turns: None,
            mode: CompactionMode::Summarize,
        }
    }
}

impl CompactionConfig {
    pub(super) fn from_raw(raw: RawCompaction) -> Result<Self, ConfigError> {
        let mut cfg = CompactionConfig::default();
        if let Some(auto) = raw.auto {
            cfg.auto = auto;
        }
        if let Some(n) = raw.max_context {
            cfg.max_context = u64::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or(ConfigError::BadMaxContext(n))?;
        }
        // Like `max_turns`: zero or less switches the trigger off.
        cfg.max_turns = raw
            .max_turns
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| *n > 0);
        if let Some(m) = raw.mode {
            cfg.mode = m;
        }
        Ok(cfg)
    }

    /// The request total at which a session compacts, for a model whose context window is
    /// `window` tokens (`None`: unknown, taken as 128000).
    pub fn threshold(&self, window: Option<u64>) -> u64 {
        let window = window.unwrap_or(UNKNOWN_CONTEXT_WINDOW);
        self.max_context
            .min(window.saturating_sub(WINDOW_RESERVE))
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<CompactionConfig, Box<dyn std::error::Error>> {
        let raw: RawCompaction = serde_yaml::from_str(yaml)?;
        Ok(CompactionConfig::from_raw(raw)?)
    }

    #[test]
    fn defaults_and_threshold() {
        let c = CompactionConfig::default();
        assert_eq!(c.threshold(None), 128_000 - 2048);
        assert_eq!(c.threshold(Some(1_000_000)), 256_000);
        assert_eq!(c.threshold(Some(10_000)), 10_000 - 2048);
        assert_eq!(c.max_turns, None);
        assert_eq!(c.mode, CompactionMode::Summarize);
        assert!(c.auto);
    }

    #[test]
    fn auto_can_be_switched_off() {
        let c = parse("auto: false\nmax_turns: 2\n").unwrap();
        assert!(!c.auto);
        assert_eq!(c.max_turns, Some(2));
        assert!(parse("auto: true\n").unwrap().auto);
        assert!(parse("auto: maybe\n").is_err());
    }

    #[test]
    fn parses_and_validates() {
        let c = parse("max_context: 5000\nmax_turns: 3\nmode: discard\n").unwrap();
        assert_eq!(c.max_context, 5000);
        assert_eq!(c.max_turns, Some(3));
        assert_eq!(c.mode, CompactionMode::Discard);
        assert_eq!(parse("max_turns: -1\n").unwrap().max_turns, None);
        assert!(
            parse("max_context: 0\n")
                .unwrap_err()
                .to_string()
                .contains("max_context")
        );
        assert!(parse("mode: fold\n").is_err());
        assert!(
            parse("max_contxt: 5\n")
                .unwrap_err()
                .to_string()
                .contains("max_contxt")
        );
    }
}
