//! Which inherited environment variables a session's shell commands may see: everything but
//! the secrets. Stripped are the variables matching `commands.strip_env` (the defaults below,
//! extended by the config; glob `*`/`?`, case-insensitive), the provider key variable and any
//! variable holding a secret value (the provider key, the serve token), whatever its name.
//! `commands.pass_env` lets matching variables through again, but never a secret one.
//!
//! It decides names and values only; it never spawns, and the hardened keys and a session's
//! own extra variables are applied after it by `spawn.rs`.

use std::ffi::OsStr;

/// The patterns always stripped (a configured `strip_env` list extends them).
pub const DEFAULT_STRIP_ENV: [&str; 6] = [
    "*_API_KEY",
    "*_TOKEN",
    "*_SECRET*",
    "*_PASSWORD",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// The environment filter of one session's commands.
#[derive(Clone)]
pub struct EnvPolicy {
    /// Upper-cased glob patterns.
    strip: Vec<Glob>,
    /// Upper-cased glob patterns let through despite `strip`.
    pass: Vec<Glob>,
    /// Upper-cased names never let through (the provider key variable).
    never: Vec<String>,
    /// Values never let through under any name (compared trimmed).
    secret_values: Vec<String>,
}

impl std::fmt::Debug for EnvPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvPolicy")
            .field("strip", &self.strip)
            .field("pass", &self.pass)
            .field("never", &self.never)
            .field("secret_values", &self.secret_values.len())
            .finish()
    }
}

impl Default for EnvPolicy {
    /// The default patterns, no exceptions.
    fn default() -> Self {
        Self::new(&[], &[])
    }
}

impl EnvPolicy {
    /// The defaults plus `strip`, with `pass` as exceptions.
    pub fn new(strip: &[String], pass: &[String]) -> Self {
        EnvPolicy {
            strip: DEFAULT_STRIP_ENV
                .iter()
                .map(|p| p.to_string())
                .chain(strip.iter().cloned())
                .map(|p| Glob::new(&p))
                .collect(),
            pass: pass.iter().map(|p| Glob::new(p)).collect(),
            never: Vec::new(),
            secret_values: Vec::new(),
        }
    }

    /// `name` is stripped whatever `pass` says.
    pub fn never_pass_name(mut self, name: &str) -> Self {
        if !name.is_empty() {
            self.never.push(name.to_ascii_uppercase());
        }
        self
    }

    /// A variable whose (trimmed) value is `value` is stripped whatever its name.
    pub fn never_pass_value(mut self, value: &str) -> Self {
        let value = value.trim();
        if !value.is_empty() {
            self.secret_values.push(value.to_string());
        }
        self
    }

    /// Whether a command may inherit `key=value`.
    pub fn allows(&self, key: &OsStr, value: &OsStr) -> bool {
        let Some(key) = key.to_str() else {
            // A name that is not UTF-8 matches no pattern; its value still may be a secret.
            return !self.is_secret_value(value);
        };
        // Names are compared upper-cased byte by byte (no upper-cased copy per variable: this
        // runs for every variable of every spawn).
        if self.never.iter().any(|n| n.eq_ignore_ascii_case(key)) || self.is_secret_value(value) {
            return false;
        }
        let key = key.as_bytes();
        let stripped = self.strip.iter().any(|p| p.matches(key));
        !stripped || self.pass.iter().any(|p| p.matches(key))
    }

    fn is_secret_value(&self, value: &OsStr) -> bool {
        !self.secret_values.is_empty()
            && value
                .to_str()
                .is_some_and(|v| self.secret_values.iter().any(|s| s == v.trim()))
    }
}

/// One upper-cased glob pattern, with the shape it has: most are a literal with a `*` at one end
/// or both (`*_API_KEY`, `*_SECRET*`) or none, checked by one comparison instead of the
/// backtracking of the general [`glob`] (which ran for every pattern and variable of a spawn).
#[derive(Clone)]
struct Glob {
    upper: String,
    /// Where `upper` is its literal, without the stars at its ends.
    literal: std::ops::Range<usize>,
    shape: Shape,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    /// No wildcard.
    Exact,
    /// `*literal`.
    Suffix,
    /// `literal*`.
    Prefix,
    /// `*literal*`.
    Contains,
    /// Only stars: anything.
    Any,
    /// A `?`, or a `*` inside the literal.
    General,
}

impl std::fmt::Debug for Glob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.upper.fmt(f)
    }
}

impl Glob {
    fn new(pattern: &str) -> Self {
        let upper = pattern.to_ascii_uppercase();
        let lead = upper.starts_with('*');
        let trail = upper.ends_with('*');
        let start = upper.len() - upper.trim_start_matches('*').len();
        let end = start.max(upper.trim_end_matches('*').len());
        let literal = &upper[start..end];
        let shape = if upper.contains('?') || literal.contains('*') {
            Shape::General
        } else if literal.is_empty() {
            if lead { Shape::Any } else { Shape::Exact }
        } else {
            match (lead, trail) {
                (false, false) => Shape::Exact,
                (true, false) => Shape::Suffix,
                (false, true) => Shape::Prefix,
                (true, true) => Shape::Contains,
            }
        };
        Glob {
            literal: start..end,
            upper,
            shape,
        }
    }

    /// Whether `text` (compared upper-cased) matches.
    fn matches(&self, text: &[u8]) -> bool {
        let literal = &self.upper.as_bytes()[self.literal.clone()];
        let n = literal.len();
        match self.shape {
            Shape::Exact => text.eq_ignore_ascii_case(literal),
            Shape::Suffix => {
                text.len() >= n && text[text.len() - n..].eq_ignore_ascii_case(literal)
            }
            Shape::Prefix => text.len() >= n && text[..n].eq_ignore_ascii_case(literal),
            Shape::Contains => text.windows(n).any(|w| w.eq_ignore_ascii_case(literal)),
            Shape::Any => true,
            Shape::General => glob(self.upper.as_bytes(), text),
        }
    }
}

/// `*` (any run) and `?` (one byte) glob over bytes; `pattern` is upper-cased, `text` is
/// compared upper-cased.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was and the text position it is trying.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t].to_ascii_uppercase() => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(p: &EnvPolicy, k: &str, v: &str) -> bool {
        p.allows(OsStr::new(k), OsStr::new(v))
    }

    #[test]
    fn a_shaped_glob_matches_as_the_general_one_does() {
        let patterns = [
            "*_API_KEY",
            "*_SECRET*",
            "AWS_SESSION_TOKEN",
            "PREFIX_*",
            "*",
            "**",
            "",
            "**X",
            "X**",
            "*A*B",
            "A?C",
            "?",
            "*?*",
            "a*b*",
            "*_token",
        ];
        let texts = [
            "",
            "X",
            "OPENAI_API_KEY",
            "openai_api_key",
            "API_KEY",
            "_API_KEY",
            "MY_SECRET",
            "MY_SECRET_THING",
            "_SECRET_",
            "AWS_SESSION_TOKEN",
            "aws_session_token",
            "PREFIX_",
            "PREFIX_A",
            "PREFIX",
            "AXB",
            "ABC",
            "AC",
            "XX",
            "A_B",
            "GITHUB_TOKEN",
            "TOKEN",
        ];
        let shapes: Vec<Shape> = patterns.iter().map(|p| Glob::new(p).shape).collect();
        assert_eq!(
            shapes,
            [
                Shape::Suffix,
                Shape::Contains,
                Shape::Exact,
                Shape::Prefix,
                Shape::Any,
                Shape::Any,
                Shape::Exact,
                Shape::Suffix,
                Shape::Prefix,
                Shape::General,
                Shape::General,
                Shape::General,
                Shape::General,
                Shape::General,
                Shape::Suffix,
            ]
        );
        for p in patterns {
            let g = Glob::new(p);
            for t in texts {
                assert_eq!(
                    g.matches(t.as_bytes()),
                    glob(g.upper.as_bytes(), t.as_bytes()),
                    "{p:?} on {t:?}"
                );
            }
        }
    }

    #[test]
    fn globs() {
        assert!(glob(b"*_API_KEY", b"OPENAI_API_KEY"));
        assert!(glob(b"*_API_KEY", b"openai_Api_key"));
        assert!(!glob(b"*_API_KEY", b"openai_api_keys"));
        assert!(!glob(b"*_API_KEY", b"API_KEY"));
        assert!(glob(b"*_SECRET*", b"MY_SECRET_THING"));
        assert!(glob(b"*_SECRET*", b"X_SECRET"));
        assert!(glob(b"A?C", b"ABC"));
        assert!(!glob(b"A?C", b"AC"));
        assert!(glob(b"*", b""));
        assert!(glob(b"**X", b"aaX"));
        assert!(!glob(b"PATH", b"PATHS"));
    }

    #[test]
    fn defaults_strip_secrets_case_insensitively_and_keep_the_rest() {
        let p = EnvPolicy::default();
        for k in [
            "OPENAI_API_KEY",
            "deepseek_api_key",
            "GITHUB_TOKEN",
            "Db_Password",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "MY_SECRET_SAUCE",
        ] {
            assert!(!allows(&p, k, "v"), "{k}");
        }
        for k in ["PATH", "HOME", "LANG", "TOKENIZER", "AWS_REGION"] {
            assert!(allows(&p, k, "v"), "{k}");
        }
    }

    #[test]
    fn config_extends_and_pass_env_excepts_but_never_a_secret() {
        let p = EnvPolicy::new(
            &["internal_*".into()],
            &["github_token".into(), "MY_KEY".into()],
        )
        .never_pass_name("MY_KEY")
        .never_pass_value("tok-123456");
        assert!(!allows(&p, "INTERNAL_URL", "x"));
        assert!(allows(&p, "GITHUB_TOKEN", "ghp"));
        assert!(
            !allows(&p, "MY_KEY", "k"),
            "the provider key variable is never passed"
        );
        assert!(
            !allows(&p, "GITHUB_TOKEN", "tok-123456\n"),
            "nor a secret value"
        );
        assert!(!allows(&p, "INNOCENT", "tok-123456"));
        assert!(allows(&p, "INNOCENT", "other"));
    }
}
