//! The texts the command policy matches for one shell command: the command with its whitespace
//! normalized, the command with quotes and escapes removed (words re-joined by single spaces,
//! operators split off), and the same for every script a `sh -c`/`bash -c`/`eval` wrapper
//! runs (nested up to a few levels).
//!
//! A reading of shell syntax good enough for a text guardrail: it expands nothing and runs
//! nothing.

/// How deep wrappers are unwrapped.
const MAX_DEPTH: usize = 4;

/// Candidate texts of `command`, each to be matched by every rule.
pub(super) fn candidates(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    collect(command, 0, &mut out);
    out
}

fn collect(command: &str, depth: usize, out: &mut Vec<String>) {
    let raw = normalize(command);
    if !out.contains(&raw) {
        out.push(raw);
    }
    let words = split(command);
    let joined = words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    if !out.contains(&joined) {
        out.push(joined);
    }
    if depth >= MAX_DEPTH {
        return;
    }
    for script in wrapped_scripts(&words) {
        collect(&script, depth + 1, out);
    }
}

/// Line continuations removed, lines joined with `;`, runs of whitespace made one space.
fn normalize(command: &str) -> String {
    let text = command.replace("\\\r\n", "").replace("\\\n", "");
    let text = text.replace("\r\n", "\n").replace('\n', " ; ");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One word of a command, or an operator (`;`, `&`, `|`, `(`, `)`).
#[derive(Debug, Clone, PartialEq)]
struct Word {
    text: String,
    operator: bool,
}

/// Splits like a shell: quotes and backslashes are removed (`'…'` literal, `"…"` with `\"`,
/// `\\`, `\$`, `` \` `` escapes), newlines and `;&|()` are operators.
fn split(command: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    let push = |words: &mut Vec<Word>, cur: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(Word {
                text: std::mem::take(cur),
                operator: false,
            });
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(n) => {
                    cur.push(n);
                    in_word = true;
                }
                None => {}
            },
            '\'' => {
                in_word = true;
                for n in chars.by_ref() {
                    if n == '\'' {
                        break;
                    }
                    cur.push(n);
                }
            }
            '"' => {
                in_word = true;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => break,
                        '\\' => match chars.peek() {
                            Some(&e) if matches!(e, '"' | '\\' | '$' | '`') => {
                                cur.push(e);
                                chars.next();
                            }
                            Some('\n') => {
                                chars.next();
                            }
                            _ => cur.push('\\'),
                        },
                        _ => cur.push(n),
                    }
                }
            }
            ';' | '&' | '|' | '(' | ')' | '\n' => {
                push(&mut words, &mut cur, &mut in_word);
                words.push(Word {
                    text: if c == '\n' { ";".into() } else { c.to_string() },
                    operator: true,
                });
            }
            c if c.is_whitespace() => push(&mut words, &mut cur, &mut in_word),
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    push(&mut words, &mut cur, &mut in_word);
    words
}

/// The scripts `words` hands to a shell: the word after `sh -c` (any shell, any flags with a
/// `c`), and the rest of the command after `eval`.
fn wrapped_scripts(words: &[Word]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if w.operator {
            continue;
        }
        let program = w.text.rsplit('/').next().unwrap_or(&w.text);
        if program == "eval" {
            let rest: Vec<&str> = words[i + 1..]
                .iter()
                .take_while(|w| !w.operator)
                .map(|w| w.text.as_str())
                .collect();
            out.push(rest.join(" "));
            continue;
        }
        if !matches!(
            program,
            "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash" | "mksh" | "busybox"
        ) {
            continue;
        }
        let mut j = i + 1;
        if program == "busybox" && words.get(j).is_some_and(|w| w.text == "sh") {
            j += 1;
        }
        let mut has_c = false;
        while let Some(flag) = words.get(j) {
            let t = &flag.text;
            if flag.operator || !(t.starts_with('-') || t.starts_with('+')) || t == "--" {
                break;
            }
            if !t.starts_with("--") && t.contains('c') {
                has_c = true;
            }
            j += 1;
        }
        if has_c && let Some(script) = words.get(j).filter(|w| !w.operator) {
            out.push(script.text.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escapes_and_operators() {
        let c = candidates("r\"m\" -rf '/' ;ls\necho a\\\nb");
        assert!(c.contains(&"rm -rf / ; ls ; echo ab".to_string()), "{c:?}");
    }

    #[test]
    fn wrappers_are_unwrapped_recursively() {
        let c = candidates("bash -lc \"sh -c 'rm -rf /'\"");
        assert!(c.contains(&"rm -rf /".to_string()), "{c:?}");
        let c = candidates("eval 'rm' -rf /");
        assert!(c.contains(&"rm -rf /".to_string()), "{c:?}");
        let c = candidates("bash script.sh -c x");
        assert!(!c.contains(&"x".to_string()), "{c:?}");
    }
}
