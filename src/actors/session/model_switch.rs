//! A running session's model switch (a parent agent's `send_message` with `model` /
//! `reasoning_effort`, `docs/collaboration.md#send_message`): the choice is resolved exactly as
//! `spawn_agent`'s (`session_api::spec::resolve_model`), the session's next request
//! goes to the new model, and a `model_switched` record lets a resumed session (and every
//! trace file after a rotation) keep it.
//!
//! It never touches the history, the pending input or a request in flight (a running stream
//! ends on the model it began with); it never starts or ends a task.

use super::{SessionOptions, SessionState};
use crate::actors::session_api::spec::{self, ResolvedModel, SpecError};
use crate::message::{EventPayload, ModelPayload, OmniMessage};
use crate::model::ModelSessionContext;

pub use crate::actors::session_api::{ModelChoice, SwitchError, Switched};

/// Resolves `choice` against the session's config; with `apply`, the session uses the model
/// from its next request on and records `model_switched`.
pub(super) fn on_switch(
    state: &mut SessionState,
    choice: &ModelChoice,
    apply: bool,
) -> Result<Switched, SpecError> {
    let resolved = spec::resolve_model(
        &state.options,
        choice.model.as_deref(),
        choice.reasoning_effort.as_deref(),
    )?;
    let Some(resolved) = resolved else {
        return Ok(Switched {
            info: state.options.model.info(),
            changed: false,
        });
    };
    let info = resolved.model.info();
    if apply {
        install(state, resolved);
    }
    Ok(Switched {
        info,
        changed: true,
    })
}

/// The `model_switched` record of `resolved`.
fn record(resolved: &ResolvedModel) -> OmniMessage {
    let info = resolved.model.info();
    let effort = resolved
        .config
        .extra
        .get("reasoning_effort")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    OmniMessage::event(EventPayload::ModelSwitched {
        model: resolved.name.clone(),
        provider: info.provider,
        model_id: info.model_id,
        context_window: info.context_window,
        reasoning_effort: effort,
    })
}

/// Swaps the session's model; the history and the call ids are kept (the new model session
/// continues the call counter and knows the ids in use, so a repeated provider id is
/// disambiguated).
fn install(state: &mut SessionState, resolved: ResolvedModel) {
    let msg = record(&resolved);
    let ctx = ModelSessionContext {
        session_id: state.id.clone(),
        is_subagent: state.options.depth > 0,
        first_prompt: state.options.first_prompt.clone(),
        next_call_index: next_call_index(state),
        requests_made: 0,
    };
    let mut session = resolved.model.open(&ctx);
    session.known_call_ids(&call_ids(state));
    state.model = session;
    state.options.model = resolved.model;
    state.options.config.model = Some(resolved.config);
    tracing::info!(session = %state.id, model = %resolved.name, "model switched");
    state.emit(msg.clone(), true);
    state.model_switch = Some(Box::new(msg));
}

/// The ids of the calls in the session's context.
fn call_ids(state: &SessionState) -> Vec<&str> {
    state
        .conversation
        .history()
        .iter()
        .chain(state.conversation.carry_over().iter())
        .filter_map(|m| match m {
            ModelPayload::ToolCall { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect()
}

/// 1 + the highest `call_<n>` the session's context holds (or its resume counted).
fn next_call_index(state: &SessionState) -> u64 {
    let seen = call_ids(state)
        .into_iter()
        .filter_map(crate::trace::resume::call_index)
        .max()
        .map_or(0, |n| n.saturating_add(1));
    let resumed = state
        .options
        .resume
        .as_ref()
        .map_or(0, |r| r.next_call_index);
    seen.max(resumed)
}

/// On resume: the model of the trace's last `model_switched`, resolved again against the
/// session's config, replaces the model `options` give. Returns the record to carry into the
/// files of later rotations. A switch that no longer resolves is logged and the given model
/// is used.
pub(super) fn on_resume(id: &str, options: &mut SessionOptions) -> Option<Box<OmniMessage>> {
    let recorded = options.resume.as_ref()?.model_switch.clone()?;
    let EventPayload::ModelSwitched {
        model,
        reasoning_effort,
        ..
    } = &recorded
    else {
        return None;
    };
    match spec::resolve_model(options, Some(model), reasoning_effort.as_deref()) {
        Ok(Some(resolved)) => {
            options.model = resolved.model;
            options.config.model = Some(resolved.config);
            Some(Box::new(OmniMessage::event(recorded)))
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(
                session = %id,
                "the recorded switch to model \"{model}\" does not resolve on resume ({e}); the session continues on {}",
                spec::current_pair(options)
            );
            None
        }
    }
}

/// A resumed session's model session learns the call ids of the resumed context.
pub(super) fn seed_resumed(model: &mut dyn crate::model::ModelSession, options: &SessionOptions) {
    if let Some(r) = &options.resume {
        let ids: Vec<&str> = r
            .history
            .iter()
            .chain(r.carry_over.iter())
            .filter_map(|m| match m {
                ModelPayload::ToolCall { tool_call_id, .. } => Some(tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        model.known_call_ids(&ids);
    }
}

/// The record a rotated trace file repeats after its header (the switch in force).
pub(super) fn header_record(state: &SessionState) -> Option<OmniMessage> {
    state.model_switch.as_deref().cloned()
}
