//! The image window of a request: only the [`MAX_REQUEST_IMAGES`] most recent images of tool
//! outputs are sent; each older one is replaced by a note in its output asking the model to read
//! the file again. Shared by the providers' request builders; pure (the history itself is never
//! changed, a trimmed copy is made only when there is something to drop).

use crate::message::ModelPayload;

/// Images of tool outputs one request carries at most.
pub(crate) const MAX_REQUEST_IMAGES: usize = 20;

/// The note that replaces `n` older images in a tool output.
pub(crate) fn dropped_note(n: usize) -> String {
    format!(
        "[{n} image(s) removed from this request: only the {MAX_REQUEST_IMAGES} most recent images are kept; read the file again to see it]"
    )
}

/// The history with only the `keep` most recent tool-output images, or `None` when it has no
/// more than that (send it as it is).
pub(crate) fn windowed(history: &[ModelPayload], keep: usize) -> Option<Vec<ModelPayload>> {
    let total: usize = history
        .iter()
        .map(|p| match p {
            ModelPayload::ToolCallOutput { images, .. } => images.len(),
            _ => 0,
        })
        .sum();
    if total <= keep {
        return None;
    }
    // Images before this many (counted from the start) go.
    let mut to_drop = total - keep;
    let trimmed = history
        .iter()
        .map(|p| match p {
            ModelPayload::ToolCallOutput {
                role,
                output,
                images,
                tool_call_id,
                stop_reason,
            } if to_drop > 0 && !images.is_empty() => {
                let n = to_drop.min(images.len());
                to_drop -= n;
                let mut output = output.clone();
                if !output.is_empty() {
                    output.push('\n');
                }
                output.push_str(&dropped_note(n));
                ModelPayload::ToolCallOutput {
                    role: *role,
                    output,
                    images: images[n..].to_vec(),
                    tool_call_id: tool_call_id.clone(),
                    stop_reason: *stop_reason,
                }
            }
            other => other.clone(),
        })
        .collect();
    Some(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Role, StopReason};

    fn out(id: &str, images: usize) -> ModelPayload {
        ModelPayload::ToolCallOutput {
            role: Role::User,
            output: format!("out {id}"),
            images: (0..images).map(|i| format!("data:{id}-{i}")).collect(),
            tool_call_id: id.to_string(),
            stop_reason: StopReason::Completed,
        }
    }

    #[test]
    fn only_the_most_recent_images_stay() {
        let history = vec![out("a", 2), out("b", 0), out("c", 2), out("d", 1)];
        assert!(windowed(&history, 5).is_none());
        let w = windowed(&history, 2).unwrap_or_default();
        let ModelPayload::ToolCallOutput { output, images, .. } = &w[0] else {
            panic!()
        };
        assert!(images.is_empty());
        assert_eq!(output, &format!("out a\n{}", dropped_note(2)));
        let ModelPayload::ToolCallOutput { output, images, .. } = &w[2] else {
            panic!()
        };
        assert_eq!(images, &vec!["data:c-1".to_string()]);
        assert!(output.ends_with(&dropped_note(1)));
        assert_eq!(w[3], history[3]);
        assert_eq!(w[1], history[1]);
    }
}
