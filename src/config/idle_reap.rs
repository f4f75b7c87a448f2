//! `commands.idle_reap`: how long a registered command may stay untouched before the session's
//! command supervisor stops and removes it. Written as a duration (`10d`, `12h`, `30m`, `90s`,
//! `500ms`); the default is 10 days.
//!
//! This module parses the value only; the reaping is `actors/command_supervisor/idle.rs`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Default of `commands.idle_reap`.
pub const DEFAULT_IDLE_REAP: Duration = Duration::from_secs(10 * 24 * 3600);

/// A validated `commands.idle_reap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleReap(pub Duration);

impl Default for IdleReap {
    fn default() -> Self {
        IdleReap(DEFAULT_IDLE_REAP)
    }
}

impl<'de> Deserialize<'de> for IdleReap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text)
            .map(IdleReap)
            .map_err(serde::de::Error::custom)
    }
}

/// A `commands.idle_reap` value that is not `<n><unit>` (the text as written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "commands.idle_reap: invalid duration \"{0}\" (use a whole number and a unit: 500ms, 90s, 30m, 12h, 10d)"
)]
pub struct InvalidDuration(pub String);

/// Parses `<n><unit>` with unit `ms`, `s`, `m`, `h` or `d` (a positive whole number).
pub fn parse_duration(text: &str) -> Result<Duration, InvalidDuration> {
    let t = text.trim();
    let bad = || InvalidDuration(text.to_string());
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    if n == 0 {
        return Err(bad());
    }
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => None,
    }
    .ok_or_else(bad)?;
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_the_rest() {
        assert_eq!(parse_duration("10d"), Ok(Duration::from_secs(864_000)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["", "10", "d", "0s", "-5s", "5 weeks", "1.5h", "5x"] {
            let e = parse_duration(bad).unwrap_err().to_string();
            assert!(e.contains("commands.idle_reap"), "{bad}: {e}");
        }
        assert_eq!(IdleReap::default().0, DEFAULT_IDLE_REAP);
    }
}
