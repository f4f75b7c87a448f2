//! `chat --resume`: fills the flags not given on the command line from what the session's
//! trace recorded (its last `session_meta`, from its trace file or the store), so a session
//! reopens with no other flag, and names the flags that were given (they override and are
//! recorded by the session).
//!
//! It only reads the trace; it must not write it nor build the model.

use std::path::Path;

use super::SessionArgs;
use crate::message::SessionMeta;
use crate::server::reopen::last_meta;

/// Fills `args` from the trace file's record; returns the reopen flags the user gave.
pub fn fill_from_trace(path: &Path, args: &mut SessionArgs) -> Vec<String> {
    fill_from_meta(last_meta(path), args)
}

/// Fills `args` from `meta`, the session's last own `session_meta` (`None`: nothing
/// recorded); returns the reopen flags the user gave.
pub fn fill_from_meta(meta: Option<SessionMeta>, args: &mut SessionArgs) -> Vec<String> {
    let m = &args.model;
    let mut given = Vec::new();
    for (flag, set) in [
        ("--script", m.script.is_some()),
        ("--provider", m.provider.is_some()),
        ("--base-url", m.base_url.is_some()),
        ("--model", m.model.is_some()),
        ("--api-key-env", m.api_key_env.is_some()),
        ("--config", args.config.is_some()),
        ("--approve", args.approve.is_some()),
        ("--tools-profile", args.tools_profile.is_some()),
        ("--sandbox", args.sandbox.mode.is_some()),
        ("--sandbox-network", args.sandbox.network.is_some()),
    ] {
        if set {
            given.push(flag.to_string());
        }
    }
    let Some(meta) = meta else {
        return given;
    };
    let launch = &meta.launch;
    // The recorded script given again is no override.
    let same_script = args
        .model
        .script
        .as_deref()
        .and_then(|p| std::path::absolute(p).ok())
        .is_some_and(|p| launch.script.as_deref() == Some(&*p.display().to_string()));
    if same_script {
        given.retain(|f| f != "--script");
    }
    if args.config.is_none() {
        args.config = launch.config.clone().map(Into::into);
    }
    if args.tools_profile.is_none() {
        args.tools_profile = launch.tool_profile.as_deref().and_then(|p| p.parse().ok());
    }
    let m = &mut args.model;
    if m.script.is_some() || m.provider.is_some() {
        // A model named on the command line replaces the recorded one entirely.
        return given;
    }
    if meta.provider == "scripted" {
        if m.base_url.is_none() && m.model.is_none() {
            m.script = launch.script.clone().map(Into::into);
        }
        return given;
    }
    if !meta.provider.is_empty() {
        m.provider = Some(meta.provider.clone());
        if m.base_url.is_none() {
            m.base_url = launch.base_url.clone();
        }
        if m.model.is_none() && !meta.model_id.is_empty() {
            m.model = Some(meta.model_id.clone());
        }
        if m.api_key_env.is_none() {
            m.api_key_env = launch.api_key_env.clone();
        }
    }
    given
}
