//! `config show`'s text: the merged config as YAML, each value followed by a comment naming
//! the layer it came from, secrets masked (values under keys that name a key, token, secret,
//! password or credential, anywhere, `env` and `headers` entries included; and values that
//! look like API keys or bearer tokens, wherever they are). The built-in defaults it starts
//! from are [`defaults`].
//!
//! It formats a tree it is given; it never reads files or the environment.

use serde_yaml::{Mapping, Value};

use super::layers::{KeyPath, Merged, key_text};

/// What a masked value becomes.
pub const MASK: &str = "********";

/// The built-in defaults `config show` starts from (what a config without the key means).
pub fn defaults() -> Value {
    let retry = super::RetryPolicy::default();
    let text = format!(
        "system_prompt: {prompt}\nmax_turns: -1\nretry:\n  max_retries: {}\n  base_ms: {}\n  cap_ms: {}\n\
         tools:\n  profile: penguin\n  max_parallel: {}\n  max_image_kb: {}\n\
         sandbox:\n  mode: 'off'\n  network: 'off'\n",
        retry.max_retries,
        retry.base_ms,
        retry.cap_ms,
        super::DEFAULT_MAX_PARALLEL,
        crate::tools::profile::openvaala::read_file::DEFAULT_MAX_IMAGE_KB,
        prompt = serde_json::Value::String(super::DEFAULT_SYSTEM_PROMPT.into()),
    );
    serde_yaml::from_str(&text).unwrap_or(Value::Mapping(Mapping::new()))
}

/// Key words of secret values (compared in lower case).
const SECRET_WORDS: &[&str] = &[
    "api_key",
    "apikey",
    "api-key",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "authorization",
    "cookie",
    "private_key",
];

/// Prefixes of values that are secrets whatever their key.
const SECRET_PREFIXES: &[&str] = &[
    "sk-",
    "ghp_",
    "gho_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "bearer ",
];

/// Whether a string under `key` is a secret. A key ending in `_env` names a variable, not its
/// value, and is shown.
fn secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    !key.ends_with("_env") && SECRET_WORDS.iter().any(|w| key.contains(w))
}

fn secret_value(text: &str) -> bool {
    let lower = text.trim().to_ascii_lowercase();
    SECRET_PREFIXES.iter().any(|p| lower.starts_with(p))
}

/// Masks the secrets of `value` (see the module's header); `key` is the key it is under.
pub fn mask(value: &mut Value, key: &str) {
    match value {
        Value::Mapping(m) => {
            for (k, v) in m.iter_mut() {
                mask(v, &key_text(k));
            }
        }
        Value::Sequence(items) => {
            for v in items {
                mask(v, key);
            }
        }
        Value::String(s) if !s.is_empty() && (secret_key(key) || secret_value(s)) => {
            *s = MASK.to_string();
        }
        Value::Tagged(t) => mask(&mut t.value, key),
        _ => {}
    }
}

/// The merged tree as YAML with the layer of each value in a comment (secrets masked).
pub fn render(merged: &Merged) -> String {
    let mut tree = merged.value.clone();
    for (k, v) in tree.iter_mut() {
        mask(v, &key_text(k));
    }
    let mut out = String::new();
    write_mapping(&mut out, &tree, &mut Vec::new(), merged);
    out
}

/// One line of flow YAML (JSON is valid YAML): a leaf stays on its key's line.
fn flow(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| {
        serde_yaml::to_string(value)
            .map(|s| s.trim_end().replace('\n', " "))
            .unwrap_or_default()
    })
}

fn write_mapping(out: &mut String, map: &Mapping, path: &mut KeyPath, merged: &Merged) {
    let indent = "  ".repeat(path.len());
    for (k, v) in map {
        let key = key_text(k);
        let shown = flow(&Value::String(key.clone()));
        let shown = if shown.trim_matches('"') == key && !key.contains(':') && !key.is_empty() {
            key.clone()
        } else {
            shown
        };
        path.push(key);
        match v {
            Value::Mapping(m) if !m.is_empty() => {
                out.push_str(&format!("{indent}{shown}:\n"));
                write_mapping(out, m, path, merged);
            }
            leaf => {
                let origin = merged
                    .origins
                    .get(path.as_slice())
                    .map(ToString::to_string)
                    .unwrap_or_else(|| "default".into());
                out.push_str(&format!("{indent}{shown}: {}  # {origin}\n", flow(leaf)));
            }
        }
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::layers::Layer;

    #[test]
    fn secrets_are_masked_and_variable_names_shown() {
        let mut v: Value = serde_yaml::from_str(
            "model: {api_key_env: MY_KEY, extra: {max_tokens: 5, api_key: abc}}\n\
             tools: {mcpServers: [{name: gh, config: {env: {GITHUB_TOKEN: t1, PLAIN: ok}, headers: {Authorization: x}}}]}\n\
             system_prompt: sk-live-123\n",
        )
        .unwrap();
        mask(&mut v, "");
        let text = serde_json::to_string(&v).unwrap();
        assert!(text.contains("\"api_key_env\":\"MY_KEY\""), "{text}");
        assert!(text.contains("\"max_tokens\":5"), "{text}");
        assert!(text.contains("\"PLAIN\":\"ok\""), "{text}");
        for secret in ["abc", "t1", "\"x\"", "sk-live"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }

    #[test]
    fn every_leaf_names_its_layer_and_the_text_is_yaml() {
        let mut m = Merged::default();
        m.merge(&defaults(), &Layer::Default);
        let user: Value = serde_yaml::from_str("model: {provider: openai}\nmax_turns: 4").unwrap();
        m.merge(&user, &Layer::User("/u/config.yaml".into()));
        let text = render(&m);
        assert!(
            text.contains("max_turns: 4  # user /u/config.yaml\n"),
            "{text}"
        );
        assert!(
            text.contains("model:\n  provider: \"openai\"  # user /u/config.yaml\n"),
            "{text}"
        );
        assert!(text.contains("  mode: \"off\"  # default\n"), "{text}");
        let back: Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(
            back.get("tools").and_then(|t| t.get("max_parallel")),
            Some(&Value::Number(16.into()))
        );
    }
}
