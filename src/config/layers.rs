//! The layers a session's config is merged from, lowest first: built-in defaults, the user
//! file, the project file (or `--config FILE` in its place), the environment, the flags; and
//! the per-key merge of their YAML trees that remembers, for every value, the layer that set it.
//!
//! Merging is per key: mappings merge deeply, anything else (a scalar, a list) replaces what
//! the layers below said. This module neither finds nor reads files (`discovery.rs`,
//! `loader.rs`) and never validates the schema.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde_yaml::{Mapping, Value};

/// Where a value of the merged config came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layer {
    /// Rookery's built-in default.
    Default,
    /// The user file (`$XDG_CONFIG_HOME/rookery/config.yaml`).
    User(PathBuf),
    /// The project file (`.rookery/config.yaml` of the workspace or a parent).
    Project(PathBuf),
    /// The file given with `--config FILE` (in the project file's place).
    Explicit(PathBuf),
    /// An environment variable (its name).
    Env(String),
    /// A command-line flag (its name, `--model`).
    Flag(String),
}

impl Layer {
    /// The layer's kind, as `config show` prints it: `default`, `user`, `project`, `config`,
    /// `env`, `flag`.
    pub fn kind(&self) -> &'static str {
        match self {
            Layer::Default => "default",
            Layer::User(_) => "user",
            Layer::Project(_) => "project",
            Layer::Explicit(_) => "config",
            Layer::Env(_) => "env",
            Layer::Flag(_) => "flag",
        }
    }

    /// The file of a file layer.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Layer::User(p) | Layer::Project(p) | Layer::Explicit(p) => Some(p),
            _ => None,
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layer::Default => f.write_str("default"),
            Layer::User(p) | Layer::Project(p) | Layer::Explicit(p) => {
                write!(f, "{} {}", self.kind(), p.display())
            }
            Layer::Env(name) => write!(f, "env {name}"),
            Layer::Flag(name) => write!(f, "flag {name}"),
        }
    }
}

/// A key path in the merged tree (`["model", "provider"]`).
pub type KeyPath = Vec<String>;

/// A key's text: strings as they are, other keys (numbers, booleans) as YAML writes them.
pub fn key_text(key: &Value) -> String {
    match key {
        Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default(),
    }
}

/// The merged tree of some layers and the layer of each of its values.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    /// The merged tree (a mapping at the top).
    pub value: Mapping,
    /// The layer of every leaf (a scalar, a list or an empty mapping), by key path.
    pub origins: BTreeMap<KeyPath, Layer>,
    /// The layers merged so far, lowest first.
    pub layers: Vec<Layer>,
}

impl Merged {
    /// Merges `overlay` (a mapping; anything else is treated as empty) over the tree.
    pub fn merge(&mut self, overlay: &Value, layer: &Layer) {
        if let Value::Mapping(m) = overlay {
            merge_into(
                &mut self.value,
                m,
                &mut Vec::new(),
                layer,
                &mut self.origins,
            );
        }
        self.layers.push(layer.clone());
    }

    /// The value at `path`, if any.
    pub fn get(&self, path: &[&str]) -> Option<&Value> {
        get(&self.value, path)
    }
}

/// The value at `path` of `root`.
pub fn get<'a>(root: &'a Mapping, path: &[&str]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = root.get(*first)?;
    for key in rest {
        value = value.as_mapping()?.get(*key)?;
    }
    Some(value)
}

/// Sets `path` of `root` to `value`, creating the mappings on the way (a non-mapping on the way
/// is replaced).
pub fn set(root: &mut Mapping, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut map = root;
    for key in parents {
        let entry = map
            .entry(Value::String((*key).to_string()))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        if !entry.is_mapping() {
            *entry = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(next) = entry else {
            return;
        };
        map = next;
    }
    map.insert(Value::String((*last).to_string()), value);
}

fn merge_into(
    base: &mut Mapping,
    overlay: &Mapping,
    path: &mut KeyPath,
    layer: &Layer,
    origins: &mut BTreeMap<KeyPath, Layer>,
) {
    for (key, value) in overlay {
        path.push(key_text(key));
        match (base.get_mut(key), value) {
            (Some(Value::Mapping(below)), Value::Mapping(above)) if !above.is_empty() => {
                merge_into(below, above, path, layer, origins);
            }
            (Some(Value::Mapping(_)), Value::Mapping(_)) => {
                // An empty mapping adds nothing to the mapping below.
            }
            _ => {
                origins.retain(|p, _| !p.starts_with(path));
                record_leaves(value, path, layer, origins);
                base.insert(key.clone(), value.clone());
            }
        }
        path.pop();
    }
}

fn record_leaves(
    value: &Value,
    path: &mut KeyPath,
    layer: &Layer,
    origins: &mut BTreeMap<KeyPath, Layer>,
) {
    match value {
        Value::Mapping(m) if !m.is_empty() => {
            for (k, v) in m {
                path.push(key_text(k));
                record_leaves(v, path, layer, origins);
                path.pop();
            }
        }
        _ => {
            origins.insert(path.clone(), layer.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Value {
        serde_yaml::from_str(text).unwrap()
    }

    #[test]
    fn mappings_merge_deeply_and_lists_replace() {
        let user = Layer::User("/u".into());
        let project = Layer::Project("/p".into());
        let mut m = Merged::default();
        m.merge(
            &yaml("model: {provider: openai, model: a}\ncommands: {strip_env: [A, B]}\n"),
            &user,
        );
        m.merge(
            &yaml("model: {model: b}\ncommands: {strip_env: [C]}\n"),
            &project,
        );
        assert_eq!(m.get(&["model", "provider"]), Some(&yaml("openai")));
        assert_eq!(m.get(&["model", "model"]), Some(&yaml("b")));
        assert_eq!(m.get(&["commands", "strip_env"]), Some(&yaml("[C]")));
        let origin = |p: &[&str]| {
            m.origins
                .get(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .cloned()
        };
        assert_eq!(origin(&["model", "provider"]), Some(user.clone()));
        assert_eq!(origin(&["model", "model"]), Some(project.clone()));
        assert_eq!(origin(&["commands", "strip_env"]), Some(project.clone()));
    }

    #[test]
    fn a_scalar_over_a_mapping_forgets_the_mapping_origins() {
        let mut m = Merged::default();
        m.merge(&yaml("model: {provider: openai}\n"), &Layer::Default);
        m.merge(&yaml("model: null\n"), &Layer::Env("X".into()));
        assert_eq!(m.origins.len(), 1);
        assert_eq!(
            m.origins.get(&vec!["model".to_string()]),
            Some(&Layer::Env("X".into()))
        );
    }

    #[test]
    fn set_creates_the_path() {
        let mut root = Mapping::new();
        set(&mut root, &["a", "b"], yaml("1"));
        set(&mut root, &["a", "c"], yaml("2"));
        assert_eq!(Value::Mapping(root), yaml("a: {b: 1, c: 2}"));
    }
}
