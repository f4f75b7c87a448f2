//! The environment layer: the `ROOKERY_*` variables that set a config key, each turned into a
//! one-key YAML tree merged above the files. (`ROOKERY_HOME`, where traces go, and
//! `ROOKERY_NO_CONFIG` are read elsewhere; the providers' own variables, `OPENAI_BASE_URL`,
//! `ANTHROPIC_BASE_URL` and the key variables, are applied with the model, by
//! `model::environment`.)
//!
//! It reads variables through the lookup it is given and checks each value against the
//! schema alone, so a bad value names its variable; it never reads files.

use serde_yaml::{Mapping, Value};

use super::ConfigError;
use super::layers::set;

/// The variables of the environment layer and the key each sets.
pub const VARIABLES: &[(&str, &[&str])] = &[
    ("ROOKERY_PROVIDER", &["model", "provider"]),
    ("ROOKERY_MODEL", &["model", "model"]),
    ("ROOKERY_API_KEY_ENV", &["model", "api_key_env"]),
    ("ROOKERY_MAX_TURNS", &["max_turns"]),
    ("ROOKERY_TOOLS_PROFILE", &["tools", "profile"]),
    ("ROOKERY_SANDBOX", &["sandbox", "mode"]),
    ("ROOKERY_SANDBOX_NETWORK", &["sandbox", "network"]),
];

/// The one-key tree of every variable that is set and not blank, in [`VARIABLES`] order.
pub fn overlays(env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<(String, Value)>, ConfigError> {
    let mut out = Vec::new();
    for (name, path) in VARIABLES {
        let Some(raw) = env(name) else { continue };
        let text = raw.trim();
        if text.is_empty() {
            continue;
        }
        let value = if *path == ["max_turns"] {
            let n: i64 = text.parse().map_err(|_| ConfigError::EnvVar {
                name: (*name).to_string(),
                message: format!("must be a whole number (got \"{text}\")"),
            })?;
            Value::Number(n.into())
        } else {
            Value::String(text.to_string())
        };
        let mut tree = Mapping::new();
        set(&mut tree, path, value);
        let tree = Value::Mapping(tree);
        super::check_schema_value(&tree).map_err(|e| ConfigError::EnvVar {
            name: (*name).to_string(),
            message: e.to_string(),
        })?;
        out.push(((*name).to_string(), tree));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variable_sets_its_key_and_a_bad_value_names_the_variable() {
        let env = |name: &str| match name {
            "ROOKERY_MODEL" => Some("gpt-x".to_string()),
            "ROOKERY_MAX_TURNS" => Some(" 7 ".to_string()),
            "ROOKERY_PROVIDER" => Some("  ".to_string()),
            _ => None,
        };
        let got = overlays(&env).unwrap();
        let names: Vec<_> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["ROOKERY_MODEL", "ROOKERY_MAX_TURNS"]);
        assert_eq!(
            got[1].1,
            serde_yaml::from_str::<Value>("max_turns: 7").unwrap()
        );
        let bad = |name: &str| (name == "ROOKERY_SANDBOX").then(|| "loose".to_string());
        let e = overlays(&bad).unwrap_err().to_string();
        assert!(
            e.starts_with("environment variable ROOKERY_SANDBOX: "),
            "{e}"
        );
        let bad = |name: &str| (name == "ROOKERY_MAX_TURNS").then(|| "many".to_string());
        let e = overlays(&bad).unwrap_err().to_string();
        assert!(e.contains("must be a whole number"), "{e}");
    }
}
