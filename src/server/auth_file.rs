//! `rookery serve --auth FILE`: the YAML file of principals, read once at start.
//!
//! ```yaml
//! # Defaults of every principal that sets none (and of JWT subjects the file does not list).
//! max_sessions: 20
//! max_running_tasks: 4
//! max_resident: 10
//! workspace_roots: [/srv/shared]
//! principals:
//!   - name: alice
//!     role: user            # user (default) | admin
//!     token_sha256: ["sha256:<64 hex>"]   # `rookery auth hash-token` makes one
//!     workspace_roots: [/home/alice/work]
//!     max_sessions: 3
//! ```
//!
//! Every value is checked before the server listens: a token that is not `sha256:` and 64 hex
//! digits (a plain token pasted by mistake), a duplicate name or token, a name that is not
//! `[A-Za-z0-9._@-]{1,64}`, a workspace root that is not an existing absolute directory, or a
//! zero limit refuses the start. This file parses and checks; it never authenticates.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::principal::{Principal, Principals, Quotas, Role};
use super::token_hash::TokenHash;

/// Why an auth file was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthFileError {
    /// It could not be read.
    #[error("--auth {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not the expected YAML.
    #[error("--auth {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A value is not allowed.
    #[error("--auth {path}: {what}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Which value and why.
        what: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    principals: Vec<PrincipalShape>,
    #[serde(default)]
    workspace_roots: Vec<PathBuf>,
    #[serde(default)]
    max_sessions: Option<usize>,
    #[serde(default)]
    max_running_tasks: Option<usize>,
    #[serde(default)]
    max_resident: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrincipalShape {
    name: String,
    #[serde(default)]
    role: Role,
    #[serde(default)]
    token_sha256: Vec<String>,
    #[serde(default)]
    workspace_roots: Option<Vec<PathBuf>>,
    #[serde(default)]
    max_sessions: Option<usize>,
    #[serde(default)]
    max_running_tasks: Option<usize>,
    #[serde(default)]
    max_resident: Option<usize>,
}

/// Whether `name` may name a principal (it becomes a metrics label and a trace field).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
}

/// Reads and checks `--auth FILE`.
pub fn load(path: &Path) -> Result<Principals, AuthFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| AuthFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// Parses and checks the text of an auth file (`path` names it in errors).
pub fn parse(path: &Path, text: &str) -> Result<Principals, AuthFileError> {
    let invalid = |what: String| AuthFileError::Invalid {
        path: path.to_path_buf(),
        what,
    };
    let shape: FileShape = serde_yaml::from_str(text).map_err(|e| AuthFileError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let default_quotas = quotas(
        path,
        "the top level",
        shape.max_sessions,
        shape.max_running_tasks,
        shape.max_resident,
        &Quotas::default(),
    )?;
    let default_roots = roots(path, "the top level", &shape.workspace_roots)?;
    let mut out = Principals {
        default_roots,
        default_quotas,
        ..Principals::default()
    };
    for (i, p) in shape.principals.into_iter().enumerate() {
        if !valid_name(&p.name) {
            return Err(invalid(format!(
                "principals[{i}].name \"{}\" must be 1-64 characters of A-Z a-z 0-9 . _ @ -",
                super::error::shown(&p.name)
            )));
        }
        let whose = format!("principal \"{}\"", p.name);
        if out.by_name(&p.name).is_some() {
            return Err(invalid(format!("{whose} is listed twice")));
        }
        let workspace_roots = match &p.workspace_roots {
            Some(list) => roots(path, &whose, list)?,
            None => out.default_roots.clone(),
        };
        let principal = Arc::new(Principal {
            name: p.name.clone(),
            role: p.role,
            workspace_roots,
            quotas: quotas(
                path,
                &whose,
                p.max_sessions,
                p.max_running_tasks,
                p.max_resident,
                &out.default_quotas,
            )?,
            label: p.name.clone(),
        });
        for (j, value) in p.token_sha256.iter().enumerate() {
            let hash = TokenHash::parse(value.trim())
                .map_err(|e| invalid(format!("{whose}: token_sha256[{j}]: {e}")))?;
            if out.tokens.iter().any(|(h, _)| h.matches(&hash)) {
                return Err(invalid(format!(
                    "{whose}: token_sha256[{j}] is another principal's token too (or listed twice)"
                )));
            }
            out.tokens.push((hash, principal.clone()));
        }
        out.listed.push(principal);
    }
    Ok(out)
}

/// The limits of `whose`, each one its own or the default's; a zero is refused (an error
/// naming the file at `path`).
fn quotas(
    path: &Path,
    whose: &str,
    max_sessions: Option<usize>,
    max_running_tasks: Option<usize>,
    max_resident: Option<usize>,
    defaults: &Quotas,
) -> Result<Quotas, AuthFileError> {
    for (name, v) in [
        ("max_sessions", max_sessions),
        ("max_running_tasks", max_running_tasks),
        ("max_resident", max_resident),
    ] {
        if v == Some(0) {
            return Err(AuthFileError::Invalid {
                path: path.to_path_buf(),
                what: format!("{whose}: {name} must be at least 1 (leave it out for no limit)"),
            });
        }
    }
    Ok(Quotas {
        max_sessions: max_sessions.or(defaults.max_sessions),
        max_running_tasks: max_running_tasks.or(defaults.max_running_tasks),
        max_resident: max_resident.or(defaults.max_resident),
    })
}

/// The canonical forms of `list`: each must be an absolute path to an existing directory.
fn roots(path: &Path, whose: &str, list: &[PathBuf]) -> Result<Vec<PathBuf>, AuthFileError> {
    let invalid = |what: String| AuthFileError::Invalid {
        path: path.to_path_buf(),
        what,
    };
    list.iter()
        .map(|root| {
            if !root.is_absolute() {
                return Err(invalid(format!(
                    "{whose}: workspace root {} must be an absolute path",
                    root.display()
                )));
            }
            match std::fs::canonicalize(root) {
                Ok(c) if c.is_dir() => Ok(c),
                Ok(_) => Err(invalid(format!(
                    "{whose}: workspace root {} is not a directory",
                    root.display()
                ))),
                Err(e) => Err(invalid(format!(
                    "{whose}: workspace root {}: {e}",
                    root.display()
                ))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(t: &str) -> String {
        TokenHash::of(t).to_string()
    }

    fn err(text: &str) -> String {
        parse(Path::new("auth.yaml"), text).unwrap_err().to_string()
    }

    #[test]
    fn a_file_with_defaults_and_two_principals() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("alice");
        std::fs::create_dir(&root).unwrap();
        let text = format!(
            "max_sessions: 5\nmax_resident: 2\nprincipals:\n  - name: alice\n    token_sha256: [\"{}\"]\n    workspace_roots: [\"{}\"]\n    max_sessions: 1\n  - name: root\n    role: admin\n    token_sha256: [\"{}\", \"{}\"]\n",
            hash("a"),
            root.join("..").join("alice").display(),
            hash("r1"),
            hash("r2"),
        );
        let p = parse(Path::new("auth.yaml"), &text).unwrap();
        let alice = p.by_token("a").unwrap();
        assert_eq!((alice.name.as_str(), alice.role), ("alice", Role::User));
        assert_eq!(alice.workspace_roots, vec![root.canonicalize().unwrap()]);
        assert_eq!(
            alice.quotas,
            Quotas {
                max_sessions: Some(1),
                max_running_tasks: None,
                max_resident: Some(2)
            }
        );
        assert_eq!(p.by_token("r2").unwrap().role, Role::Admin);
        assert_eq!(p.by_token("r1").unwrap().quotas.max_sessions, Some(5));
        assert!(p.by_token("r3").is_none());
    }

    #[test]
    fn bad_values_are_refused_with_what_to_fix() {
        let e = err("principals:\n  - name: alice\n    token_sha256: [\"s3cret\"]\n");
        assert!(
            e.contains("principal \"alice\": token_sha256[0]: not a token hash"),
            "{e}"
        );
        assert!(e.contains("rookery auth hash-token"), "{e}");
        let twice = format!(
            "principals:\n  - name: a\n    token_sha256: [\"{0}\"]\n  - name: b\n    token_sha256: [\"{0}\"]\n",
            hash("t")
        );
        assert!(err(&twice).contains("another principal's token"));
        assert!(err("principals:\n  - name: a\n  - name: a\n").contains("listed twice"));
        assert!(err("principals:\n  - name: \"a b\"\n").contains("must be 1-64 characters"));
        assert!(
            err("principals:\n  - name: a\n    role: root\n").starts_with("--auth auth.yaml: ")
        );
        assert!(err("principals:\n  - name: a\n    tokens: []\n").contains("unknown field"));
        assert!(err("max_sessions: 0\n").contains("max_sessions must be at least 1"));
        assert!(err("workspace_roots: [rel]\n").contains("must be an absolute path"));
        assert!(err("workspace_roots: [/no/such/dir/here]\n").contains("/no/such/dir/here"));
    }
}
