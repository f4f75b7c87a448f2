//! What an API client may learn when a server-side config file is invalid: the error's shape,
//! the schema names it mentions and its line and column, never a piece of the file.
//!
//! [`describe`] keeps an error message only when everything left outside its quotes is made of
//! the words of the parsers' error templates, schema names and numbers. Inside quotes, a key
//! named in backticks (serde's way of naming fields and variants) is shown when it is a plain
//! identifier; a string value (in double quotes) only when it is a schema name; everything
//! else as `…`. Anything else falls back to "invalid agent
//! config at line L column C". It only rewrites texts; it never reads files.

/// Words of the error templates of serde, the YAML parser and the config checks.
const TEMPLATE_WORDS: &[&str] = &[
    "a",
    "an",
    "and",
    "any",
    "as",
    "at",
    "be",
    "block",
    "boolean",
    "byte",
    "character",
    "column",
    "config",
    "could",
    "did",
    "document",
    "duplicate",
    "end",
    "enum",
    "error",
    "expected",
    "field",
    "find",
    "floating",
    "for",
    "found",
    "from",
    "in",
    "indentation",
    "integer",
    "invalid",
    "is",
    "key",
    "known",
    "length",
    "line",
    "map",
    "mapping",
    "missing",
    "model",
    "more",
    "multiple",
    "must",
    "name",
    "newtype",
    "no",
    "not",
    "null",
    "of",
    "one",
    "option",
    "or",
    "parsing",
    "point",
    "recursion",
    "scalar",
    "sequence",
    "simple",
    "start",
    "stream",
    "string",
    "struct",
    "than",
    "the",
    "there",
    "this",
    "tool",
    "tools",
    "type",
    "unexpected",
    "unit",
    "unknown",
    "unsupported",
    "value",
    "values",
    "variant",
    "while",
    "with",
    "within",
    "allowed",
    "context",
    "are",
    "anchor",
    "alias",
    "tag",
    "flow",
    "plain",
    "quoted",
    "scanning",
    "u8",
    "u16",
    "u32",
    "u64",
    "i8",
    "i16",
    "i32",
    "i64",
    "f64",
    "usize",
    "bool",
    "elements",
    "element",
    "entries",
    "entry",
    "least",
    "most",
    "limit",
    "exceeded",
    "build",
    "available",
    "rookery",
    "RawAgentConfig",
    "RetryPolicy",
    "ToolsSection",
    "ModelConfig",
    "ToolOverride",
    "BuiltinEntry",
    "Permission",
    "ForModel",
    "untagged",
    "did",
    "match",
    "data",
];

/// Field and value names of the agent config schema.
const SCHEMA_WORDS: &[&str] = &[
    "system_prompt",
    "max_turns",
    "retry",
    "max_retries",
    "base_ms",
    "cap_ms",
    "tools",
    "builtin",
    "name",
    "description",
    "parameters",
    "permission",
    "forModel",
    "timeoutMs",
    "maxOutputLength",
    "call_description",
    "model",
    "provider",
    "base_url",
    "api_key_env",
    "context_window",
    "vision",
    "vision_model",
    "idle_timeout_ms",
    "request_timeout_ms",
    "extra",
    "commands",
    "strip_env",
    "pass_env",
    "r",
    "rw",
    "read_image",
    "describe_image",
];

fn is_schema_word(word: &str) -> bool {
    SCHEMA_WORDS.contains(&word)
        || crate::tools::profile::penguin::builtin_registry()
            .get(word)
            .is_some()
}

/// A key as a person writes one: `[A-Za-z_][A-Za-z0-9_]*`, at most 64 characters.
fn is_identifier(s: &str) -> bool {
    s.len() <= 64
        && s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_safe_word(word: &str) -> bool {
    word.bytes().all(|b| b.is_ascii_digit())
        || TEMPLATE_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word))
        || is_schema_word(word)
}

/// `line L column C` of the message, when it has one (numbers only).
fn location(message: &str) -> Option<String> {
    let at = message.find("line ")?;
    let rest = &message[at + 5..];
    let line: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let col = rest[line.len()..].strip_prefix(" column ")?;
    let col: String = col.chars().take_while(char::is_ascii_digit).collect();
    if line.is_empty() || col.is_empty() {
        return None;
    }
    Some(format!("line {line} column {col}"))
}

/// The message with quoted values replaced, or `None` when something outside the quotes is
/// not a template word, a schema name or a number.
fn sanitize(message: &str) -> Option<String> {
    let mut out = String::new();
    let mut outside = String::new();
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        let close = match c {
            '"' => '"',
            '`' => '`',
            _ => {
                outside.push(c);
                out.push(c);
                continue;
            }
        };
        let mut quoted = String::new();
        let mut closed = false;
        while let Some(q) = chars.next() {
            if close == '"' && q == '\\' {
                quoted.push(q);
                if let Some(n) = chars.next() {
                    quoted.push(n);
                }
                continue;
            }
            if q == close {
                closed = true;
                break;
            }
            quoted.push(q);
        }
        if !closed {
            return None;
        }
        outside.push(' ');
        if is_schema_word(&quoted) || (close == '`' && is_identifier(&quoted)) {
            out.extend([close].into_iter().chain(quoted.chars()).chain([close]));
        } else {
            out.extend([close, '…', close]);
        }
    }
    let safe_chars = outside
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c.is_ascii_whitespace() || c.is_ascii_punctuation());
    let safe_words = outside
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .all(is_safe_word);
    (safe_chars && safe_words).then_some(out)
}

/// The text an API client gets for an invalid server-side config.
pub fn describe(message: &str) -> String {
    match sanitize(message) {
        Some(text) => text,
        None => match location(message) {
            Some(at) => format!("invalid agent config at {at}"),
            None => "invalid agent config".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AgentConfig;

    fn error_of(yaml: &str) -> String {
        match AgentConfig::from_yaml(yaml) {
            Ok(_) => panic!("{yaml:?} parsed"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn schema_errors_keep_their_shape() {
        let d = describe(&error_of("max_turn: 3\n"));
        assert!(
            d.starts_with("unknown field `max_turn`, expected one of `system_prompt`"),
            "{d}"
        );
        let d = describe(&error_of("max_turns: [\n"));
        assert_eq!(
            d,
            "max_turns: invalid type: sequence, expected i64 at line 1 column 12"
        );
        let d = describe(&error_of("max_turns: many\n"));
        assert!(d.contains("invalid type: string \"…\""), "{d}");
        assert!(!d.contains("many"), "{d}");
        let d = describe(&error_of("tools:\n  builtin: [read_fiel]\n"));
        assert!(
            d.starts_with("unknown tool \"…\" in tools.builtin (known tools: read_file,"),
            "{d}"
        );
        let d = describe(&error_of("retry: {max_retries: -1}\n"));
        assert_eq!(
            d,
            "retry.max_retries: invalid type: integer `…`, expected u32 at line 1 column 22"
        );
    }

    #[test]
    fn no_content_of_a_foreign_file_survives() {
        let passwd =
            "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n";
        let shadow = "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\n";
        for text in [
            passwd,
            shadow,
            "secret-key: [1, 2\n",
            "a: b\n  c: `x\" y\n",
            "ключ: 1\n",
        ] {
            let raw = error_of(text);
            let d = describe(&raw);
            for piece in [
                "root", "bash", "daemon", "nologin", "hash", "salt", "secret", "ключ",
            ] {
                assert!(!d.contains(piece), "{piece} in {d:?} (from {raw:?})");
            }
        }
        assert_eq!(
            describe("unknown field `a`b`, expected one of `max_turns`"),
            "invalid agent config"
        );
    }
}
