//! The `config` of `POST /v1/sessions` and `…/resume`: an inline JSON object with the schema of
//! the YAML agent config, or the name of a config in the server's `--config-dir`.
//!
//! A name (`^[A-Za-z0-9_-]+$`) is `DIR/<name>.yaml`, else `DIR/<name>.yml`, opened relative to
//! the directory without following a link, a regular file of at most 1 MiB, read on the
//! blocking pool. A path is refused. Errors about a file name the field or line, never its
//! content (see `config_error.rs`). Sessions always use the server's model, so a `model`
//! section is refused. This file only reads and parses configs; it never starts a session.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::{Mode, SFlag, fstat};
use serde_json::Value;

use super::config_error::describe;
use super::error::ApiError;
use crate::config::AgentConfig;
use crate::model::model_config::ModelConfig;

/// Largest config file read from the config directory.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The directory of named configs, held open from the start.
#[derive(Clone)]
pub struct ConfigDir {
    path: PathBuf,
    fd: Arc<OwnedFd>,
}

impl std::fmt::Debug for ConfigDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ConfigDir").field(&self.path).finish()
    }
}

impl ConfigDir {
    /// Opens `path` (which must be a directory).
    pub fn open(path: &Path) -> Result<Self, std::io::Error> {
        let fd = open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        Ok(ConfigDir {
            path: path.to_path_buf(),
            fd: Arc::new(fd),
        })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads `<name>.yaml` or `<name>.yml` (blocking; call it off the async threads).
    fn read(&self, name: &str) -> Result<String, ApiError> {
        let not_found = || {
            invalid(format!(
                "no config named \"{name}\" in the server's config directory"
            ))
        };
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let mut opened = None;
        for ext in ["yaml", "yml"] {
            match openat(
                self.fd.as_ref(),
                format!("{name}.{ext}").as_str(),
                flags,
                Mode::empty(),
            ) {
                Ok(fd) => {
                    opened = Some(fd);
                    break;
                }
                Err(Errno::ENOENT) => continue,
                Err(Errno::ELOOP) => {
                    return Err(invalid(format!(
                        "config \"{name}\" is a symbolic link; links are not followed"
                    )));
                }
                Err(e) => {
                    tracing::warn!("config {name}: {e}");
                    return Err(invalid(format!("config \"{name}\" cannot be opened")));
                }
            }
        }
        let fd = opened.ok_or_else(not_found)?;
        let st = fstat(&fd).map_err(|e| invalid(format!("config \"{name}\": {e}")))?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return Err(invalid(format!("config \"{name}\" is not a regular file")));
        }
        let too_big = || {
            invalid(format!(
                "config \"{name}\" is larger than {MAX_CONFIG_BYTES} bytes"
            ))
        };
        if st.st_size < 0 || st.st_size as u64 > MAX_CONFIG_BYTES {
            return Err(too_big());
        }
        let mut bytes = Vec::new();
        std::fs::File::from(fd)
            .take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| invalid(format!("config \"{name}\" cannot be read: {e}")))?;
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            return Err(too_big());
        }
        String::from_utf8(bytes).map_err(|_| invalid(format!("config \"{name}\" is not UTF-8")))
    }
}

fn invalid(message: String) -> ApiError {
    ApiError::bad_request("invalid_config", message)
}

/// True for a config name: letters, digits, `_` and `-`, at most 128 of them.
pub fn is_config_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The refusal of a config with a `model` section (`name`: a named config's), whatever the
/// section holds: it is looked for before the config is parsed.
fn model_refused(name: Option<&str>) -> ApiError {
    let subject = match name {
        Some(name) => format!("config \"{name}\""),
        None => "config".to_string(),
    };
    invalid(format!(
        "{subject}: the model section is not accepted here; served sessions use the server's model (remove \"model\")"
    ))
}

/// Whether a YAML config's top level has a `model` key (text that is no mapping has none).
fn yaml_has_model(text: &str) -> bool {
    serde_yaml::from_str::<serde_yaml::Value>(text)
        .ok()
        .and_then(|v| v.as_mapping().map(|m| m.contains_key("model")))
        .unwrap_or(false)
}

/// The session's config from a request's `config` member; its tools are assembled for the
/// server's model (`server_model`, the scripted model when `None`).
pub async fn resolve(
    value: Value,
    dir: Option<&ConfigDir>,
    server_model: Option<&ModelConfig>,
) -> Result<AgentConfig, ApiError> {
    let mut config = match value {
        Value::Object(map) if map.contains_key("model") => return Err(model_refused(None)),
        Value::Object(map) if map.contains_key("hooks") => {
            return Err(invalid(
                "config: hooks are not accepted inline (they run commands on the server); use serve --hooks or a config in --config-dir".to_string(),
            ));
        }
        Value::Object(map) => {
            let yaml = serde_yaml::to_string(&Value::Object(map))
                .map_err(|e| invalid(format!("config: {e}")))?;
            AgentConfig::from_yaml(&yaml).map_err(|e| invalid(format!("config: {e}")))?
        }
        Value::String(name) if is_config_name(&name) => {
            let Some(dir) = dir.cloned() else {
                return Err(invalid(format!(
                    "config \"{name}\": this server has no --config-dir; send the config inline as a JSON object"
                )));
            };
            let read_name = name.clone();
            let text = tokio::task::spawn_blocking(move || dir.read(&read_name))
                .await
                .map_err(|_| ApiError::internal("reading the config failed"))??;
            if yaml_has_model(&text) {
                return Err(model_refused(Some(&name)));
            }
            AgentConfig::from_yaml(&text)
                .map_err(|e| invalid(format!("config \"{name}\": {}", describe(&e.to_string()))))?
        }
        Value::String(_) => {
            return Err(invalid(
                "config must be an inline JSON object or the name of a config in the server's --config-dir (letters, digits, _ and -); paths are not accepted".to_string(),
            ));
        }
        _ => {
            return Err(invalid(
                "config must be a JSON object, the session's agent config with the fields of an agent config file (e.g. {\"system_prompt\": \"…\", \"max_turns\": 5}), or the name of a config in the server's --config-dir".to_string(),
            ));
        }
    };
    if config.model.is_some() {
        return Err(model_refused(None));
    }
    if let Some(model) = server_model {
        config
            .set_model(model.clone())
            .map_err(|e| invalid(format!("config: {e}")))?;
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    #[tokio::test]
    async fn any_model_section_is_refused_before_parsing() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("m.yaml"), "model: {}\nmax_turns: 2\n").unwrap();
        let dir = ConfigDir::open(tmp.path()).unwrap();
        for (value, dir) in [
            (serde_json::json!({"model": {}}), None),
            (serde_json::json!({"model": null, "max_turns": 2}), None),
            (serde_json::json!({"model": "x", "hooks": {}}), None),
            (Value::String("m".into()), Some(&dir)),
        ] {
            let e = resolve(value.clone(), dir, None).await.err().unwrap();
            assert_eq!(
                (e.status, e.code),
                (StatusCode::BAD_REQUEST, "invalid_config")
            );
            assert!(
                e.message.contains("the model section is not accepted here"),
                "{value}: {}",
                e.message
            );
            assert!(!e.message.contains("provider"), "{}", e.message);
        }
    }

    #[test]
    fn names() {
        for ok in ["a", "dev-1", "A_b"] {
            assert!(is_config_name(ok), "{ok}");
        }
        for bad in ["", "../x", "a.yaml", "/etc/passwd", "a b", "é"] {
            assert!(!is_config_name(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn named_configs_stay_inside_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("good.yml"), "max_turns: 3\n").unwrap();
        std::fs::write(d.join("bad.yaml"), "root:x:0:0:root:/root:/bin/bash\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.join("link.yaml")).unwrap();
        std::fs::create_dir(d.join("sub.yaml")).unwrap();
        nix::unistd::mkfifo(&d.join("fifo.yaml"), Mode::S_IRWXU).unwrap();
        std::fs::write(d.join("big.yaml"), "#".repeat(1024 * 1024 + 1)).unwrap();
        let dir = ConfigDir::open(d).unwrap();
        let cfg = resolve(Value::String("good".into()), Some(&dir), None)
            .await
            .unwrap();
        assert_eq!(cfg.max_turns, 3);
        for (name, expect) in [
            ("link", "is a symbolic link"),
            ("sub", "is not a regular file"),
            ("fifo", "is not a regular file"),
            ("big", "is larger than 1048576 bytes"),
            ("nope", "no config named \"nope\""),
            ("bad", "config \"bad\": invalid"),
        ] {
            let e = resolve(Value::String(name.into()), Some(&dir), None)
                .await
                .err()
                .unwrap();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(expect), "{name}: {}", e.message);
            assert!(!e.message.contains("root"), "{}", e.message);
        }
        let e = resolve(Value::String("/etc/passwd".into()), Some(&dir), None)
            .await
            .err()
            .unwrap();
        assert!(
            e.message.contains("paths are not accepted"),
            "{}",
            e.message
        );
        let e = resolve(serde_json::json!({"max_turns": "x"}), None, None)
            .await
            .err()
            .unwrap();
        assert!(e.message.starts_with("config: "), "{}", e.message);
        let e = resolve(
            serde_json::json!({"model": {"provider": "scripted"}}),
            None,
            None,
        )
        .await
        .err()
        .unwrap();
        assert!(e.message.contains("model section"), "{}", e.message);
        let cfg = resolve(serde_json::json!({"system_prompt": "hi"}), None, None)
            .await
            .unwrap();
        assert_eq!(cfg.system_prompt, "hi");
    }
}
