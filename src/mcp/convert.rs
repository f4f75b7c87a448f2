//! Turns an MCP `CallToolResult` (as JSON) into what the close-out takes: the text, the images
//! and the verdict.
//!
//! Text blocks are joined with newlines; images become data URLs for vision models, else a
//! placeholder; `resource_link` reads `[resource: <uri>] <description>`; an embedded resource
//! is its text or `[resource: <uri> (binary)]`; `structuredContent` is its JSON text when there
//! is no text; `isError: true` fails the call. Pure: no I/O.

use serde_json::Value;

/// The converted result of one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Converted {
    /// The text the model reads.
    pub text: String,
    /// `data:<mime>;base64,<data>` URLs (vision models only).
    pub images: Vec<String>,
    /// The server marked the result as an error (`isError`).
    pub is_error: bool,
}

/// Converts `result` (a `CallToolResult` serialized to JSON). `vision`: the session's model
/// takes images.
pub(crate) fn convert(result: &Value, vision: bool) -> Converted {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    let mut has_text = false;
    let content = result.get("content").and_then(Value::as_array);
    for block in content.into_iter().flatten() {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let s = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => {
                has_text = true;
                parts.push(s("text").to_string());
            }
            "image" => {
                let mime = block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("image/png");
                if vision && !s("data").is_empty() {
                    images.push(format!("data:{mime};base64,{}", s("data")));
                    parts.push(format!("[image: {mime}, attached]"));
                } else {
                    parts.push(format!("[image: {mime}; this model does not take images]"));
                }
            }
            "audio" => {
                let mime = block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("audio");
                parts.push(format!("[audio: {mime}; not shown]"));
            }
            "resource_link" => {
                let desc = block
                    .get("description")
                    .and_then(Value::as_str)
                    .or_else(|| block.get("name").and_then(Value::as_str))
                    .unwrap_or("");
                parts.push(
                    format!("[resource: {}] {desc}", s("uri"))
                        .trim_end()
                        .to_string(),
                );
            }
            "resource" => {
                let res = block.get("resource").cloned().unwrap_or(Value::Null);
                let uri = res.get("uri").and_then(Value::as_str).unwrap_or("");
                match res.get("text").and_then(Value::as_str) {
                    Some(t) => {
                        has_text = true;
                        parts.push(t.to_string());
                    }
                    None => parts.push(format!("[resource: {uri} (binary)]")),
                }
            }
            other => parts.push(format!("[unsupported content: {other}]")),
        }
    }
    if !has_text && let Some(sc) = result.get("structuredContent").filter(|v| !v.is_null()) {
        parts.push(sc.to_string());
    }
    Converted {
        text: parts.join("\n"),
        images,
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_blocks_join_with_newlines() {
        let c = convert(
            &json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
            false,
        );
        assert_eq!(c.text, "a\nb");
        assert!(!c.is_error);
    }

    #[test]
    fn images_attach_for_vision_models_only() {
        let r = json!({"content": [{"type": "image", "data": "QUJD", "mimeType": "image/png"}]});
        let v = convert(&r, true);
        assert_eq!(v.images, vec!["data:image/png;base64,QUJD".to_string()]);
        let t = convert(&r, false);
        assert!(t.images.is_empty());
        assert!(t.text.contains("does not take images"), "{}", t.text);
    }

    #[test]
    fn resources_and_links() {
        let c = convert(
            &json!({"content": [
                {"type": "resource_link", "uri": "file:///a", "name": "a", "description": "the A"},
                {"type": "resource", "resource": {"uri": "file:///t", "text": "inline"}},
                {"type": "resource", "resource": {"uri": "file:///b", "blob": "AAAA"}}
            ]}),
            false,
        );
        assert_eq!(
            c.text,
            "[resource: file:///a] the A\ninline\n[resource: file:///b (binary)]"
        );
    }

    #[test]
    fn structured_content_only_without_text() {
        let c = convert(
            &json!({"content": [], "structuredContent": {"t": 1}}),
            false,
        );
        assert_eq!(c.text, r#"{"t":1}"#);
        let c = convert(
            &json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"t": 1}}),
            false,
        );
        assert_eq!(c.text, "x");
    }

    #[test]
    fn is_error_fails() {
        let c = convert(
            &json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
            false,
        );
        assert!(c.is_error);
        assert_eq!(c.text, "boom");
    }
}
