//! A session's secrets: the provider key (the value of the model config's `api_key_env`
//! variable) and the caller's extra values (`SessionOptions::secrets`, e.g. the serve token).
//! Builds the session's [`Redactor`] (shared by sessions with the same secrets) and the
//! environment policy of its commands.
//!
//! It reads the environment and the options only; recording and streaming stay in the session.

use std::sync::{Arc, Mutex};

use super::SessionOptions;
use crate::message::OmniMessage;
use crate::model::model_config::DEFAULT_API_KEY_ENV;
use crate::process::env_policy::EnvPolicy;
use crate::redact::Redactor;
use crate::trace::writer::record_line;

/// The variable the session's provider key is read from.
fn provider_key_var(options: &SessionOptions) -> &str {
    options
        .config
        .model
        .as_ref()
        .map_or(DEFAULT_API_KEY_ENV, |m| m.api_key_env())
}

/// The secret values of a session (unset or empty ones left out).
fn values(options: &SessionOptions) -> Vec<String> {
    let mut values: Vec<String> = std::env::var(provider_key_var(options))
        .ok()
        .into_iter()
        .chain(options.secrets.iter().cloned())
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    values.dedup();
    values
}

/// The last redactor built, by its values: the sessions of one host share one.
static SHARED: Mutex<Option<(Vec<String>, Arc<Redactor>)>> = Mutex::new(None);

/// The session's redactor; `None` when it has no secrets.
pub(crate) fn redactor(options: &SessionOptions) -> Option<Arc<Redactor>> {
    let values = values(options);
    if values.is_empty() {
        return None;
    }
    if let Ok(shared) = SHARED.lock()
        && let Some((v, r)) = shared.as_ref()
        && *v == values
    {
        return Some(r.clone());
    }
    let built = Arc::new(Redactor::new(values.iter())?);
    if let Ok(mut shared) = SHARED.lock() {
        *shared = Some((values, built.clone()));
    }
    Some(built)
}

/// What the session's commands may inherit: `commands.strip_env`/`pass_env` of the config,
/// never the provider key variable nor a secret value.
pub(super) fn env_policy(options: &SessionOptions) -> Arc<EnvPolicy> {
    let commands = &options.config.commands;
    let mut policy = EnvPolicy::new(&commands.strip_env, &commands.pass_env)
        .never_pass_name(provider_key_var(options));
    for v in values(options) {
        policy = policy.never_pass_value(&v);
    }
    Arc::new(policy)
}

/// `msg` with every secret scrubbed, and its trace line when it is recordable.
pub(super) fn scrub(
    redactor: &Redactor,
    msg: OmniMessage,
    record: bool,
) -> (OmniMessage, Option<Vec<u8>>) {
    let Some(line) = record_line(&msg) else {
        return (msg, None);
    };
    let Some(clean) = redactor.redact_bytes(&line) else {
        return (msg, record.then_some(line));
    };
    let text = String::from_utf8_lossy(&clean);
    match OmniMessage::from_json(text.trim_end()) {
        Ok(m) => (m, record.then_some(clean)),
        Err(e) => {
            // Cannot happen for whole-secret replacements; never let the secret through.
            tracing::error!("cannot rebuild a redacted message: {e}");
            let m = crate::message::build::abort(Some("[redacted message]".to_string()));
            let line = record_line(&m);
            (m, if record { line } else { None })
        }
    }
}
