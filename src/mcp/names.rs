//! Model-facing names of MCP tools: `mcp__<server>__<tool>`, sanitised to `[A-Za-z0-9_-]`, at
//! most 64 characters, with a short hash suffix when the name is too long or already taken.
//!
//! Pure functions; it knows nothing of connections or registries.

/// The longest tool name models accept.
pub const MAX_NAME_LEN: usize = 64;

/// `mcp__<server>__<tool>` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn base_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// 8 hex digits of FNV-1a over `server`, a NUL and `tool` (stable across runs and builds).
pub fn short_hash(server: &str, tool: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in server.bytes().chain([0u8]).chain(tool.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", (h >> 32) ^ (h & 0xffff_ffff))
}

/// The name of `server`'s tool `tool`, given a test for names already taken: the base name when
/// it fits and is free, else its head and `_<hash>` (then `_<hash>_<n>` while still taken).
pub fn tool_name(server: &str, tool: &str, taken: impl Fn(&str) -> bool) -> String {
    let base = base_name(server, tool);
    if base.len() <= MAX_NAME_LEN && !taken(&base) {
        return base;
    }
    let hash = short_hash(server, tool);
    let head: String = base.chars().take(MAX_NAME_LEN - hash.len() - 1).collect();
    let hashed = format!("{head}_{hash}");
    if !taken(&hashed) {
        return hashed;
    }
    for n in 2u32.. {
        let suffix = format!("_{hash}_{n}");
        let head: String = base.chars().take(MAX_NAME_LEN - suffix.len()).collect();
        let name = format!("{head}{suffix}");
        if !taken(&name) {
            return name;
        }
    }
    hashed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitised_and_prefixed() {
        assert_eq!(
            tool_name("every", "get-sum", |_| false),
            "mcp__every__get-sum"
        );
        assert_eq!(
            tool_name("fs", "read.file v2", |_| false),
            "mcp__fs__read_file_v2"
        );
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let long = "t".repeat(100);
        let n = tool_name("srv", &long, |_| false);
        assert_eq!(n.len(), MAX_NAME_LEN);
        assert!(n.ends_with(&short_hash("srv", &long)), "{n}");
    }

    #[test]
    fn collisions_get_distinct_names() {
        // "a.b" and "a_b" sanitise to the same base name.
        let first = tool_name("s", "a.b", |_| false);
        let second = tool_name("s", "a_b", |n| n == first);
        assert_eq!(first, "mcp__s__a_b");
        assert_ne!(first, second);
        assert!(second.starts_with("mcp__s__a_b_") && second.len() <= MAX_NAME_LEN);
        let third = tool_name("s", "a_b", |n| n == first || n == second);
        assert!(third != first && third != second && third.len() <= MAX_NAME_LEN);
    }
}
