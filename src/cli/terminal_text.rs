//! Model and tool text made safe for a terminal: control characters (escape sequences, carriage
//! returns, C1 controls) are shown as visible symbols instead of reaching the terminal raw, so a
//! model cannot move the cursor, recolour, retitle or clear the user's screen.
//!
//! It only rewrites text; it decides nothing about what is shown (that is `live.rs`), and it is
//! not used for output that is not a terminal (pipes keep the bytes as they are).

/// `text` with every control character but newline and tab made visible: C0 controls as their
/// Unicode control pictures (ESC as `␛`, CR as `␍`), DEL as `␡`, C1 controls as `\u{9b}`.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            '\u{0}'..='\u{1f}' => {
                // The control pictures block mirrors C0: U+2400 + code.
                out.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or('?'));
            }
            '\u{7f}' => out.push('␡'),
            '\u{80}'..='\u{9f}' => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_made_visible() {
        assert_eq!(
            escape_controls("a\u{1b}[31mred\r\n\tb\u{7}\u{7f}\u{9b}2J é"),
            "a␛[31mred␍\n\tb␇␡\\u{9b}2J é"
        );
        assert_eq!(escape_controls("plain ünïcødé 字"), "plain ünïcødé 字");
    }
}
