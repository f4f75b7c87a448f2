//! The output schema's check before a task completes: the final answer (the assistant text of
//! the turn that ended without tool calls) must be JSON valid against the task's
//! `output_schema`. A valid answer is kept as the task's `output` (carried by `task_end`); an
//! invalid one is fed back to the model as a harness-sent user text naming the (bounded)
//! validation errors and the task goes on, at most `max_output_retries` times, after which the
//! task ends `failed` with the reason `output_invalid: …`.
//!
//! A pure transition like the rest of the machine: it only returns effects. Parsing and
//! validating are `OutputSchema`'s (`session_api/output_schema.rs`).

use crate::message::{ModelPayload, Role, Sender, StopReason, build};

use super::{Effect, Fx, Machine};

/// The prefix of a failed task's reason when its answer never met the schema.
pub(crate) const OUTPUT_INVALID: &str = "output_invalid";

impl Machine<'_> {
    /// The task would complete now: checks its answer against its output schema (if any)
    /// and completes it, asks the model again, or fails it.
    pub(super) fn complete_into(&mut self, fx: &mut Fx) {
        let Some(task) = self.task.as_deref_mut() else {
            return;
        };
        let Some(schema) = task.output_schema.clone() else {
            return self.finish_into(fx, StopReason::Completed, None);
        };
        let answer = final_answer(&task.turn.produced);
        match schema.check(&answer) {
            Ok(value) => {
                task.output = Some(value);
                self.finish_into(fx, StopReason::Completed, None);
            }
            Err(invalid) if task.output_retries < schema.max_retries() => {
                task.output_retries += 1;
                let text = format!(
                    "Your final answer does not meet the required output schema:\n{}\n\
                     Answer again with only a JSON value valid against this schema:\n{}",
                    invalid.describe(),
                    schema.schema()
                );
                let msg = build::user_text(text, Some(Sender::Harness));
                let input = msg.as_model().cloned();
                fx.push(Effect::Emit(msg));
                fx.push(Effect::NextRequest(input.into_iter().collect()));
            }
            Err(invalid) => {
                let reason = format!(
                    "{OUTPUT_INVALID}: the final answer does not meet output_schema after {} \
                     retries:\n{}",
                    task.output_retries,
                    invalid.describe()
                );
                self.finish_into(fx, StopReason::Failed, Some(reason));
            }
        }
    }
}

/// The assistant text of the last turn (its text segments, joined by newlines).
fn final_answer(produced: &[ModelPayload]) -> String {
    produced
        .iter()
        .filter_map(|p| match p {
            ModelPayload::Text {
                role: Role::Assistant,
                text,
                ..
            } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
