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
    NotAnObject {
        /// The place, e.g. `turns[0]`.
        what: String,
        /// What it is instead (`an array`, `a string`, …).
        kind: &'static str,
    },
    /// The JSON does not fit the format (`path`: the innermost failing place, when found).
    #[error("{}{source}", at(.path))]
    Format {
        /// The innermost failing place (`turns[1].tool_calls[0]`), when found.
        path: Option<String>,
        /// Serde's reason.
        #[source]
        source: serde_json::Error,
    },
    /// `repeat` is 0 (`at`: the turn, e.g. `turns[1]`).
    #[error("{at}.repeat: must be at least 1")]
    ZeroRepeat {
        /// The turn, e.g. `turns[1]`.
        at: String,
    },
    /// A tool call without a name (`at`: the call).
    #[error("{at}.name: must not be empty")]
    EmptyToolName {
        /// The call, e.g. `turns[0].tool_calls[1]`.
        at: String,
    },
    /// A tool call's `arguments` is neither an object nor a string (`kind`: what it is).
    #[error("{at}.arguments: must be a JSON object or a string, not {kind}")]
    ArgumentsKind {
        /// The call, e.g. `turns[0].tool_calls[1]`.
        at: String,
        /// What it is instead (`a number`, `an array`, …).
        kind: &'static str,
    },
    /// A placeholder in a tool call's `arguments` is invalid.
    #[error("{at}.arguments: {source}")]
    Placeholder {
        /// The call, e.g. `turns[0].tool_calls[1]`.
        at: String,
        /// What is wrong with the placeholder.
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
    /// No `:` separates the tool call index from the regex.
    #[error(
        "placeholder \"{placeholder}\" has no ':' after the tool call index (expected {{{{output:K:REGEX}}}})"
    )]
    NoColon {
        /// The placeholder's text (clipped).
        placeholder: String,
    },
    /// The tool call index is not an integer.
    #[error(
        "placeholder \"{placeholder}\" has an invalid tool call index \"{index}\" (expected an integer)"
    )]
    BadIndex {
        /// The placeholder's text (clipped).
        placeholder: String,
        /// The index as written.
        index: String,
    },
    /// The placeholder has no closing `}}`.
    #[error("placeholder \"{placeholder}\" is not closed by \"}}}}\"")]
    Unclosed {
        /// The placeholder's text (clipped).
        placeholder: String,
    },
    /// The regex does not compile (`reason`: the regex crate's reason, on one line).
    #[error("placeholder regex \"{regex}\" is invalid: {reason}")]
    InvalidRegex {
        /// The regex as written.
        regex: String,
        /// The regex crate's reason, on one line.
        reason: String,
        /// The regex crate's error.
        #[source]
        source: regex::Error,
    },
    /// The regex has no capture group (the value is the first group).
    #[error("placeholder regex \"{regex}\" has no capture group (the value is the first group)")]
    NoCaptureGroup {
        /// The regex as written.
        regex: String,
    },
}
