//! `${VAR}` and `${VAR:-default}` expansion of MCP server settings from the environment, as
//! Claude Code's `.mcp.json` allows in commands, arguments, URLs and headers.
//!
//! Text in, text out: production reads the process environment; it never reads files or starts
//! a server.

/// Why `${VAR}` expansion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// A `${` without its `}` (the whole text).
    #[error("unclosed ${{ in {0:?}")]
    Unclosed(String),
    /// A variable without a default that is not set.
    #[error("environment variable {0} is not set")]
    Unset(String),
}

/// Replaces every `${VAR}` (and `${VAR:-default}`) with the variable from the environment; an
/// unset variable without a default is an error naming it.
pub fn expand(text: &str) -> Result<String, ExpandError> {
    expand_with(text, |k| std::env::var(k).ok())
}

fn expand_with(text: &str, get: impl Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Unclosed(text.to_string()));
        };
        let inner = &after[..end];
        let (var, default) = match inner.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (inner, None),
        };
        match (get(var), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(ExpandError::Unset(var.to_string())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_expand() {
        let get = |k: &str| (k == "TOKEN").then(|| "s3cret".to_string());
        assert_eq!(
            expand_with("Bearer ${TOKEN}", get).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(expand_with("${NOPE:-dflt}/x", get).unwrap(), "dflt/x");
        assert!(
            expand_with("${NOPE}", get)
                .unwrap_err()
                .to_string()
                .contains("NOPE")
        );
    }

    #[test]
    fn expansion_errors_keep_their_texts() {
        let get = |_: &str| None;
        assert_eq!(
            expand_with("${NOPE}", get).unwrap_err().to_string(),
            "environment variable NOPE is not set"
        );
        assert_eq!(
            expand_with("a ${B", get).unwrap_err().to_string(),
            "unclosed ${ in \"a ${B\""
        );
    }
}
