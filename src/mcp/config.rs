//! MCP server configuration: `tools.mcpServers: [{name, config}]` of the agent config (the
//! PenguinHarness shape) and Claude Code's `.mcp.json` (`{"mcpServers": {name: config}}`, read
//! with `--mcp-config FILE`). Validates every entry into a [`McpServerConfig`]; an invalid entry
//! is an [`McpConfigError`] naming it.
//!
//! It parses and validates only: it starts nothing and knows nothing of sessions or actors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use super::env_expand::{ExpandError, expand};

/// Default of `connectTimeoutMs` (connect + first tool list).
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;
/// Default of `timeoutMs` (each tool call).
pub const DEFAULT_TIMEOUT_MS: i64 = 120_000;
/// Default of `maxOutputLength`.
pub const DEFAULT_MAX_OUTPUT_LENGTH: i64 = 16_000;
/// Why a build without the `mcp` feature refuses configured servers.
pub const NO_MCP_SUPPORT: &str = "this build has no MCP support: rebuild with the `mcp` feature";

/// An MCP configuration that cannot be used; every message names the entry.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    /// An entry that cannot be used.
    #[error("MCP server {entry}: {message}")]
    Entry {
        /// The entry's name, or `#<n>` (1-based) for a YAML entry without a usable name.
        entry: String,
        /// What is wrong with it.
        message: String,
    },
    /// A server name that is not a valid tool name part.
    #[error("MCP server name {name:?} is not valid: it must match ^[A-Za-z0-9][A-Za-z0-9_-]*$")]
    BadName {
        /// The name as configured.
        name: String,
    },
    /// Two entries with the same name.
    #[error("MCP server {name:?} is configured twice")]
    Duplicate {
        /// The repeated name.
        name: String,
    },
    /// The MCP config file cannot be read.
    #[error("cannot read the MCP config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The MCP config file is not valid JSON of the expected shape.
    #[error("invalid MCP config {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What does not parse, and where.
        message: String,
    },
    /// Servers are configured, but this build cannot connect to them (no `mcp` feature).
    #[error("MCP servers configured ({names}), but {NO_MCP_SUPPORT}")]
    NotBuilt {
        /// The configured servers' names, comma-separated.
        names: String,
    },
}

/// `list` as it is; in a build without the `mcp` feature, an error when it names a server.
fn supported(list: Vec<McpServerConfig>) -> Result<Vec<McpServerConfig>, McpConfigError> {
    supported_in(list, cfg!(feature = "mcp"))
}

/// `list` as it is in a build with MCP support (`built`), an error naming its servers otherwise.
fn supported_in(
    list: Vec<McpServerConfig>,
    built: bool,
) -> Result<Vec<McpServerConfig>, McpConfigError> {
    if built || list.is_empty() {
        return Ok(list);
    }
    let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
    Err(McpConfigError::NotBuilt {
        names: names.join(", "),
    })
}

/// How tool calls of a server are approved: from each tool's `readOnlyHint` (`auto`), or all
/// `r` / all `rw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpPermission {
    /// From each tool's `readOnlyHint` (the default).
    Auto,
    /// Every tool counts as read-only (`r`).
    Read,
    /// Every tool counts as writing (`rw`).
    ReadWrite,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        /// The program to run.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it (`${VAR}` already expanded).
        env: Vec<(String, String)>,
        /// Its working directory (default: the workspace).
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        /// The endpoint (`http://` or `https://`).
        url: String,
        /// Headers sent with every request (e.g. `Authorization`).
        headers: Vec<(String, String)>,
    },
}

impl McpTransport {
    /// `stdio` or `http` (as traced).
    pub fn kind(&self) -> &'static str {
        match self {
            McpTransport::Stdio { .. } => "stdio",
            McpTransport::Http { .. } => "http",
        }
    }
}

/// One validated server entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The server's name (`mcp__<name>__<tool>` in tool names).
    pub name: String,
    /// How to reach the server.
    pub transport: McpTransport,
    /// The budget for connecting and listing the tools, in milliseconds (default 10000).
    pub connect_timeout_ms: u64,
    /// Per call; `<= 0` disables it (the close-out's timeout).
    pub timeout_ms: i64,
    /// The cap on one call's output, in chars (default 16000).
    pub max_output_length: i64,
    /// How its calls are approved.
    pub permission: McpPermission,
    /// Only these tools (by the server's name), when set.
    pub enabled_tools: Option<Vec<String>>,
    /// Tools left out (by the server's name).
    pub disabled_tools: Vec<String>,
    /// `"sandbox": "off"`: a stdio server of a sandboxed session runs unconfined.
    pub sandbox_off: bool,
}

impl McpServerConfig {
    /// Whether the server's tool `tool` is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|e| e.iter().any(|t| t == tool))
            && !self.disabled_tools.iter().any(|t| t == tool)
    }
}

/// True when `name` matches `^[A-Za-z0-9][A-Za-z0-9_-]*$`.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `tools.mcpServers` of an agent config: a list of `{name, config}`.
pub fn from_servers_list(value: &Value) -> Result<Vec<McpServerConfig>, McpConfigError> {
    let Some(list) = value.as_array() else {
        return Err(McpConfigError::Entry {
            entry: "list".into(),
            message: "tools.mcpServers must be a list of {name, config} entries".into(),
        });
    };
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let entry = format!("#{}", i + 1);
        let Some(obj) = item.as_object() else {
            return Err(McpConfigError::Entry {
                entry,
                message: "an entry must be an object {name, config}".into(),
            });
        };
        if let Some(k) = obj.keys().find(|k| *k != "name" && *k != "config") {
            return Err(McpConfigError::Entry {
                entry: obj
                    .get("name")
                    .and_then(Value::as_str)
                    .map_or(entry, |n| format!("{n:?}")),
                message: format!("unknown key {k:?} (an entry has name and config)"),
            });
        }
        let Some(name) = obj.get("name").and_then(Value::as_str) else {
            return Err(McpConfigError::Entry {
                entry,
                message: "name is missing or not a string".into(),
            });
        };
        let config = obj.get("config").cloned().unwrap_or(Value::Null);
        push_unique(&mut out, parse_entry(name, &config)?)?;
    }
    supported(out)
}

/// A Claude Code style `.mcp.json` text: `{"mcpServers": {name: config}}`.
pub fn from_mcp_json(text: &str) -> Result<Vec<McpServerConfig>, McpConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|e| McpConfigError::Entry {
        entry: "file".into(),
        message: format!("not JSON: {e}"),
    })?;
    let Some(map) = value.get("mcpServers").and_then(Value::as_object) else {
        return Err(McpConfigError::Entry {
            entry: "file".into(),
            message: "the file has no \"mcpServers\" object".into(),
        });
    };
    let mut out = Vec::new();
    for (name, config) in map {
        push_unique(&mut out, parse_entry(name, config)?)?;
    }
    Ok(out)
}

/// Reads `--mcp-config FILE`.
pub fn from_file(path: &Path) -> Result<Vec<McpServerConfig>, McpConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| McpConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let list = from_mcp_json(&text).map_err(|e| McpConfigError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    supported(list)
}

/// Appends `more` to `list`; a name already there is an error.
pub fn merge(
    list: &mut Vec<McpServerConfig>,
    more: Vec<McpServerConfig>,
) -> Result<(), McpConfigError> {
    for s in more {
        push_unique(list, s)?;
    }
    Ok(())
}

fn push_unique(list: &mut Vec<McpServerConfig>, s: McpServerConfig) -> Result<(), McpConfigError> {
    if list.iter().any(|o| o.name == s.name) {
        return Err(McpConfigError::Duplicate { name: s.name });
    }
    list.push(s);
    Ok(())
}

const KEYS: [&str; 16] = [
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "connectTimeoutMs",
    "timeoutMs",
    "maxOutputLength",
    "permission",
    "enabled_tools",
    "disabled_tools",
    "enabledTools",
    "disabledTools",
    "sandbox",
];

/// One server's `config` object.
pub fn parse_entry(name: &str, config: &Value) -> Result<McpServerConfig, McpConfigError> {
    if !valid_name(name) {
        return Err(McpConfigError::BadName {
            name: name.to_string(),
        });
    }
    let bad = |message: String| McpConfigError::Entry {
        entry: format!("{name:?}"),
        message,
    };
    let field = |e: FieldError| bad(e.to_string());
    let Some(obj) = config.as_object() else {
        return Err(bad("config must be an object".into()));
    };
    if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(bad(format!("unknown key {k:?} in config")));
    }
    let kind = match obj.get("type") {
        None => None,
        Some(Value::String(t)) => Some(t.as_str()),
        Some(_) => return Err(bad("type must be a string".into())),
    };
    let command = opt_string(obj, "command").map_err(field)?;
    let url = opt_string(obj, "url").map_err(field)?;
    let transport = match (kind, command, url) {
        (Some("sse"), ..) => {
            return Err(bad(
                "type \"sse\" (the old HTTP+SSE transport) is not supported; use streamable HTTP"
                    .into(),
            ));
        }
        (Some(t), ..) if !["stdio", "http", "streamable-http", "streamableHttp"].contains(&t) => {
            return Err(bad(format!(
                "unknown type {t:?} (stdio or http; it is inferred from command or url)"
            )));
        }
        (_, Some(_), Some(_)) => return Err(bad("give either command or url, not both".into())),
        (_, None, None) => {
            return Err(bad(
                "needs command (a stdio server) or url (a streamable-HTTP server)".into(),
            ));
        }
        (Some("stdio"), None, Some(_)) => return Err(bad("type stdio needs command".into())),
        (Some(t), Some(_), None) if t != "stdio" => return Err(bad(format!("type {t} needs url"))),
        (_, Some(command), None) => {
            if command.trim().is_empty() {
                return Err(bad("command is empty".into()));
            }
            if obj.contains_key("headers") {
                return Err(bad("headers belong to an HTTP server (url)".into()));
            }
            McpTransport::Stdio {
                command,
                args: string_list(obj, "args").map_err(field)?.unwrap_or_default(),
                env: expand_map(string_map(obj, "env").map_err(|e| bad(e.to_string()))?)
                    .map_err(|e| bad(e.to_string()))?,
                cwd: opt_string(obj, "cwd").map_err(field)?.map(PathBuf::from),
            }
        }
        (_, None, Some(url)) => {
            for k in ["args", "env", "cwd"] {
                if obj.contains_key(k) {
                    return Err(bad(format!("{k} belongs to a stdio server (command)")));
                }
            }
            let url = expand(&url).map_err(|e| bad(e.to_string()))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(bad(format!(
                    "url {url:?} must start with http:// or https://"
                )));
            }
            McpTransport::Http {
                url,
                headers: expand_map(string_map(obj, "headers").map_err(|e| bad(e.to_string()))?)
                    .map_err(|e| bad(e.to_string()))?,
            }
        }
    };
    let connect_timeout_ms = match int(obj, "connectTimeoutMs").map_err(field)? {
        None => DEFAULT_CONNECT_TIMEOUT_MS,
        Some(n) if n > 0 => n as u64,
        Some(n) => return Err(bad(format!("connectTimeoutMs must be positive (got {n})"))),
    };
    let permission = match opt_string(obj, "permission").map_err(field)?.as_deref() {
        None | Some("auto") => McpPermission::Auto,
        Some("r") => McpPermission::Read,
        Some("rw") => McpPermission::ReadWrite,
        Some(p) => return Err(bad(format!("permission must be auto, r or rw (got {p:?})"))),
    };
    let enabled_tools = match string_list(obj, "enabled_tools").map_err(field)? {
        Some(l) => Some(l),
        None => string_list(obj, "enabledTools").map_err(field)?,
    };
    let mut disabled_tools = string_list(obj, "disabled_tools")
        .map_err(field)?
        .unwrap_or_default();
    disabled_tools.extend(
        string_list(obj, "disabledTools")
            .map_err(field)?
            .unwrap_or_default(),
    );
    let sandbox_off = match opt_string(obj, "sandbox").map_err(field)?.as_deref() {
        None | Some("on") => false,
        Some("off") => true,
        Some(v) => return Err(bad(format!("sandbox must be off or on (got {v:?})"))),
    };
    Ok(McpServerConfig {
        sandbox_off,
        name: name.to_string(),
        transport,
        connect_timeout_ms,
        timeout_ms: int(obj, "timeoutMs")
            .map_err(field)?
            .unwrap_or(DEFAULT_TIMEOUT_MS),
        max_output_length: int(obj, "maxOutputLength")
            .map_err(field)?
            .unwrap_or(DEFAULT_MAX_OUTPUT_LENGTH),
        permission,
        enabled_tools,
        disabled_tools,
    })
}

/// A field of an entry with a value of the wrong type (`got`: the value's JSON text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum FieldError {
    #[error("{key} must be a string")]
    Text { key: String },
    #[error("{key} must be a whole number (got {got})")]
    WholeNumber { key: String, got: String },
    #[error("{key} must be a list of strings")]
    TextList { key: String },
}

fn opt_string(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(FieldError::Text {
            key: key.to_string(),
        }),
    }
}

fn int(obj: &Map<String, Value>, key: &str) -> Result<Option<i64>, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| FieldError::WholeNumber {
            key: key.to_string(),
            got: v.to_string(),
        }),
    }
}

fn string_list(obj: &Map<String, Value>, key: &str) -> Result<Option<Vec<String>>, FieldError> {
    let not_list = || FieldError::TextList {
        key: key.to_string(),
    };
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(not_list))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(not_list()),
    }
}

/// A map of strings (`env`, `headers`) of the wrong shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum StringMapError {
    #[error("{key}.{entry} must be a string")]
    NotString { key: String, entry: String },
    #[error("{key} must be an object of strings")]
    NotObject { key: String },
}

/// A configured map of names to texts (`env`, `headers`).
type StringMap = BTreeMap<String, String>;

fn string_map(obj: &Map<String, Value>, key: &str) -> Result<StringMap, StringMapError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(StringMapError::NotString {
                    key: key.to_string(),
                    entry: k.clone(),
                }),
            })
            .collect(),
        Some(_) => Err(StringMapError::NotObject {
            key: key.to_string(),
        }),
    }
}

fn expand_map(map: StringMap) -> Result<Vec<(String, String)>, ExpandError> {
    map.into_iter()
        .map(|(k, v)| expand(&v).map(|v| (k, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> String {
        from_servers_list(&v)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn a_build_without_mcp_refuses_configured_servers_by_name() {
        let list =
            from_mcp_json(r#"{"mcpServers": {"a": {"command": "x"}, "b": {"url": "http://h/"}}}"#)
                .unwrap();
        let e = supported_in(list.clone(), false).unwrap_err().to_string();
        assert_eq!(
            e,
            "MCP servers configured (a, b), but this build has no MCP support: \
             rebuild with the `mcp` feature"
        );
        assert_eq!(supported_in(Vec::new(), false).unwrap().len(), 0);
        assert_eq!(supported_in(list, true).unwrap().len(), 2);
        // This build's own answer follows its feature.
        let one = from_servers_list(&json!([{"name": "s", "config": {"command": "x"}}]));
        assert_eq!(one.is_ok(), cfg!(feature = "mcp"), "{one:?}");
    }

    #[test]
    fn an_entry_may_run_its_server_outside_the_sandbox() {
        let off = parse_entry("s", &json!({"command": "x", "sandbox": "off"})).unwrap();
        assert!(off.sandbox_off);
        let on = parse_entry("s", &json!({"command": "x"})).unwrap();
        assert!(!on.sandbox_off);
        let e = parse_entry("s", &json!({"command": "x", "sandbox": "loose"}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("sandbox must be off or on"), "{e}");
    }

    #[test]
    fn stdio_and_http_are_inferred_with_defaults() {
        let list = from_servers_list(&json!([
            {"name": "every", "config": {"command": "node", "args": ["x.js"], "env": {"A": "1"}}},
            {"name": "web_2", "config": {"url": "http://127.0.0.1:1/mcp", "headers": {"X": "y"},
              "timeoutMs": 500, "permission": "r", "disabled_tools": ["echo"]}}
        ]))
        .unwrap();
        assert_eq!(list[0].transport.kind(), "stdio");
        assert_eq!(list[0].connect_timeout_ms, 10_000);
        assert_eq!(list[0].timeout_ms, 120_000);
        assert_eq!(list[0].permission, McpPermission::Auto);
        assert_eq!(list[1].transport.kind(), "http");
        assert_eq!(list[1].timeout_ms, 500);
        assert_eq!(list[1].permission, McpPermission::Read);
        assert!(!list[1].offers("echo") && list[1].offers("get-sum"));
    }

    #[test]
    fn invalid_entries_name_themselves() {
        assert!(err(json!([{"name": "-bad", "config": {"command": "x"}}])).contains("\"-bad\""));
        let e = err(json!([{"name": "a", "config": {}}]));
        assert!(
            e.contains("MCP server \"a\"") && e.contains("command"),
            "{e}"
        );
        let e = err(json!([{"name": "a", "config": {"command": "x", "url": "http://h"}}]));
        assert!(e.contains("\"a\"") && e.contains("not both"), "{e}");
        let e = err(json!([{"name": "a", "config": {"command": "x", "timeoutMS": 1}}]));
        assert!(e.contains("\"a\"") && e.contains("timeoutMS"), "{e}");
        let e = err(json!([{"name": "a", "config": {"url": "ftp://h"}}]));
        assert!(e.contains("http://"), "{e}");
        let e = err(json!([{"name": "a", "config": {"command": "x", "permission": "x"}}]));
        assert!(e.contains("permission"), "{e}");
        let e = err(json!([{"name": "a", "config": {"command": "x"}},
                            {"name": "a", "config": {"command": "y"}}]));
        assert!(e.contains("twice"), "{e}");
        let e =
            err(json!([{"name": "a", "config": {"url": "http://h/${ROOKERY_TEST_UNSET_VAR}"}}]));
        assert!(e.contains("ROOKERY_TEST_UNSET_VAR"), "{e}");
    }

    #[test]
    fn mcp_json_shape() {
        let list = from_mcp_json(
            r#"{"mcpServers": {"everything": {"type": "stdio", "command": "npx", "args": ["-y", "x"]},
                               "remote": {"type": "http", "url": "https://example.invalid/mcp"}}}"#,
        )
        .unwrap();
        assert_eq!(list.len(), 2);
        let e = from_mcp_json(r#"{"mcpServers": {"old": {"type": "sse", "url": "http://h"}}}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("\"old\"") && e.contains("sse"), "{e}");
        assert!(from_mcp_json(r#"{"servers": {}}"#).is_err());
    }
}
