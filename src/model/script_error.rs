//! Why a script does not load: [`ScriptError`] names the place (`turns[2]`,
//! `children[0].turns[1].tool_calls[0]`) and the problem; [`PlaceholderError`] what is wrong
//! with one `{{output:K:REGEX}}` placeholder. The `Display` texts are the load errors users
//! see, so they do not change. Wording only: `scripted` and its `placeholder` find the problems.
//! It sits beside `scripted` (not inside it) so that `error` can wrap it without a cycle;
//! `scripted` re-exports both types.

/// A script that does not parse or validate.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The text is not JSON.
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// A place of the format that must be a JSON object is not (`kind`: what it is).
    #[error("{what}: expected a JSON object, not {kind}")]
    NotAnObject { what: String, kind: &'static str },
    /// The JSON does not fit the format (`path`: the innermost failing place, when found).
    #[error("{}{source}", at(.path))]
    Format {
        path: Option<String>,
        #[source]
        source: serde_json::Error,
    },
    /// `repeat` is 0 (`at`: the turn, e.g. `turns[1]`).
    #[error("{at}.repeat: must be at least 1")]
    ZeroRepeat { at: String },
    /// A tool call without a name (`at`: the call).
    #[error("{at}.name: must not be empty")]
    EmptyToolName { at: String },
    /// A tool call's `arguments` is neither an object nor a string (`kind`: what it is).
    #[error("{at}.arguments: must be a JSON object or a string, not {kind}")]
    ArgumentsKind { at: String, kind: &'static str },
    /// A placeholder in a tool call's `arguments` is invalid.
    #[error("{at}.arguments: {source}")]
    Placeholder {
        at: String,
        #[source]
        source: PlaceholderError,
    },
}

fn at(path: &Option<String>) -> String {
    path.as_ref().map(|p| format!("{p}: ")).unwrap_or_default()
}

/// What is wrong with one `{{output:K:REGEX}}` placeholder (`placeholder`: its text, clipped).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlaceholderError {
    #[error(
        "placeholder \"{placeholder}\" has no ':' after the tool call index (expected {{{{output:K:REGEX}}}})"
    )]
    NoColon { placeholder: String },
    #[error(
        "placeholder \"{placeholder}\" has an invalid tool call index \"{index}\" (expected an integer)"
    )]
    BadIndex { placeholder: String, index: String },
    #[error("placeholder \"{placeholder}\" is not closed by \"}}}}\"")]
    Unclosed { placeholder: String },
    /// The regex does not compile (`reason`: the regex crate's reason, on one line).
    #[error("placeholder regex \"{regex}\" is invalid: {reason}")]
    InvalidRegex {
        regex: String,
        reason: String,
        #[source]
        source: regex::Error,
    },
    #[error("placeholder regex \"{regex}\" has no capture group (the value is the first group)")]
    NoCaptureGroup { regex: String },
}
