//! Loads a session's config from its layers: the user file, then the project file or the
//! `--config FILE` given in its place, then the `ROOKERY_*` environment (flags are applied by
//! the caller, last). Each file is checked alone against the schema first, so an error names
//! the file and the line; the project file is checked for what it may not set
//! (`project_trust.rs`); then the merged tree is validated as one config.
//!
//! It reads the files it is pointed at (bounded in size) and the variables through the lookup
//! it is given; it never looks at flags or starts anything.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_yaml::{Mapping, Value};

use super::layers::{Layer, Merged};
use super::{AgentConfig, ConfigError, discovery, env_layer, project_trust};

/// A config file larger than this is refused (a config is a few kilobytes).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// What to load.
pub struct Sources<'a> {
    /// The session's workspace (where the project file is searched from).
    pub workspace: &'a Path,
    /// `--config FILE`: read in the project file's place, and trusted.
    pub explicit: Option<&'a Path>,
    /// False with `--no-config-discovery` (or `ROOKERY_NO_CONFIG`): no user or project file.
    pub discover: bool,
    /// The Rookery home (`~/.rookery`, traces): never taken for a project's `.rookery` folder.
    pub home: Option<&'a Path>,
    /// The environment.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The provider the flags name (`--provider`, or what `--script` and `--base-url` imply)
    /// and the flag: it completes a `model:` section that names none.
    pub provider_flag: Option<(&'a str, &'a str)>,
}

/// A loaded config and the layers it came from.
pub struct Loaded {
    /// The validated config (flags not applied yet).
    pub config: AgentConfig,
    /// The merged tree of the files and the environment, with each value's layer.
    pub merged: Merged,
}

/// The file layers of `sources`, lowest first (files that do not exist are left out, but an
/// explicit `--config FILE` is always there).
pub fn file_layers(sources: &Sources<'_>) -> Vec<Layer> {
    let mut layers = Vec::new();
    if sources.discover
        && let Some(user) = discovery::user_file(sources.env)
        && user.exists()
    {
        layers.push(Layer::User(user));
    }
    match sources.explicit {
        Some(path) => layers.push(Layer::Explicit(path.to_path_buf())),
        None if sources.discover => {
            let skip = sources.home.map(|h| h.to_path_buf());
            if let Some(p) = discovery::project_file(sources.workspace, skip.as_deref()) {
                layers.push(Layer::Project(p));
            }
        }
        None => {}
    }
    layers
}

/// Reads a config file, refusing one over [`MAX_FILE_BYTES`].
fn read(path: &Path) -> Result<String, ConfigError> {
    let io = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(ConfigError::InvalidConfig {
            path: path.to_path_buf(),
            message: format!("larger than {MAX_FILE_BYTES} bytes"),
        });
    }
    Ok(text)
}

/// A file's tree, checked against the schema (errors name the file and the line).
fn parse(path: &Path, text: &str) -> Result<Value, ConfigError> {
    let invalid = |e: serde_yaml::Error| ConfigError::InvalidConfig {
        path: path.to_path_buf(),
        message: with_line(e.to_string(), text),
    };
    super::check_schema(text).map_err(invalid)?;
    if text.trim().is_empty() {
        return Ok(Value::Mapping(Mapping::new()));
    }
    let value: Value = serde_yaml::from_str(text).map_err(invalid)?;
    Ok(match value {
        Value::Null => Value::Mapping(Mapping::new()),
        v => v,
    })
}

/// `message` with the line of the key it names (`unknown field `x``) when serde gave none.
fn with_line(message: String, text: &str) -> String {
    if message.contains(" line ") {
        return message;
    }
    let key = message
        .split('`')
        .nth(1)
        .filter(|k| !k.is_empty())
        .map(|k| format!("{k}:"));
    let line = key.and_then(|key| {
        text.lines()
            .position(|l| l.trim_start().trim_start_matches("- ").starts_with(&key))
    });
    match line {
        Some(n) => format!("{message} (line {})", n + 1),
        None => message,
    }
}

/// Loads the config of `sources` (see the module's header).
pub fn load(sources: &Sources<'_>) -> Result<Loaded, ConfigError> {
    let mut merged = Merged::default();
    let mut only_file: Option<PathBuf> = None;
    let files = file_layers(sources);
    for layer in &files {
        let Some(path) = layer.path() else { continue };
        let text = read(path)?;
        let tree = parse(path, &text)?;
        if let Layer::Project(p) = layer {
            project_trust::check(p, &tree, &merged.value)?;
        }
        merged.merge(&tree, layer);
        only_file = Some(path.to_path_buf());
    }
    for (name, tree) in env_layer::overlays(sources.env)? {
        merged.merge(&tree, &Layer::Env(name));
    }
    let mut completed = false;
    if let Some((provider, flag)) = sources.provider_flag
        && let Some(Value::Mapping(model)) = merged.value.get_mut("model")
        && !model.contains_key("provider")
    {
        model.insert("provider".into(), provider.into());
        merged.origins.insert(
            vec!["model".into(), "provider".into()],
            Layer::Flag(flag.into()),
        );
        completed = true;
    }
    let config = match (merged.layers.as_slice(), only_file) {
        ([], _) => AgentConfig::default(),
        // One file: exactly what `--config FILE` always did.
        ([_], Some(path)) if !completed => AgentConfig::from_file(&path)?,
        (layers, _) => {
            let text = serde_yaml::to_string(&merged.value).map_err(ConfigError::Yaml)?;
            AgentConfig::from_yaml(&text).map_err(|e| {
                if e.is_about_content() {
                    ConfigError::InvalidMerged {
                        layers: layers
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        message: e.to_string(),
                    }
                } else {
                    e
                }
            })?
        }
    };
    Ok(Loaded { config, merged })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_in(
        dir: &Path,
        explicit: Option<&Path>,
        vars: &[(&str, &str)],
    ) -> Result<Loaded, String> {
        let home = dir.join("home");
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain([("HOME".to_string(), home.display().to_string())])
            .collect();
        let env = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        load(&Sources {
            workspace: &home,
            explicit,
            discover: true,
            home: Some(&home.join(".rookery")),
            env: &env,
            provider_flag: None,
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn a_cross_section_error_names_the_merged_layers() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("home/.config/rookery/config.yaml");
        std::fs::create_dir_all(user.parent().unwrap()).unwrap();
        std::fs::write(&user, "agents:\n  helper:\n    model: fast\n").unwrap();
        let e = load_in(dir.path(), None, &[("ROOKERY_MAX_TURNS", "3")])
            .err()
            .unwrap_or_default();
        assert!(
            e.starts_with(&format!(
                "invalid config (merged from user {}, env ROOKERY_MAX_TURNS): agents.helper.model: unknown model \"fast\"",
                user.display()
            )),
            "{e}"
        );
        // One file alone reads exactly as `--config FILE` always did.
        let e = load_in(dir.path(), None, &[]).err().unwrap_or_default();
        assert!(
            e.starts_with(&format!(
                "invalid config {}: agents.helper.model",
                user.display()
            )),
            "{e}"
        );
    }

    #[test]
    fn the_rookery_home_is_no_project_folder() {
        let dir = tempfile::tempdir().unwrap();
        let traces = dir.path().join("home/.rookery/config.yaml");
        std::fs::create_dir_all(traces.parent().unwrap()).unwrap();
        std::fs::write(&traces, "max_turns: 3\n").unwrap();
        let loaded = load_in(dir.path(), None, &[]).unwrap();
        assert_eq!(loaded.config.max_turns, -1);
        assert!(loaded.merged.layers.is_empty());
    }
}
