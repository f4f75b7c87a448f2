//! What a schedule's `cron` and `timezone` mean: a 5-field cron pattern (minute, hour, day of
//! month, month, day of week; parsed by `croner`) evaluated in an IANA time zone (`chrono-tz`)
//! on the server's schedule clock, and the `if_busy` it runs with.
//!
//! The clock counts *schedule minutes* from the Unix epoch, each `--schedule-minute-ms` long
//! (60000 by default): minute `m` is `floor(unix_ms / minute_ms)`, and the pattern judges it as
//! the wall time `m * 60` seconds after the epoch. So the clock is continuous across restarts,
//! and a test with a short minute sees hours pass in seconds.
//!
//! Pure functions over plain data: no I/O, no server state.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// The Gregorian calendar repeats every 400 years (146,097 days, a whole number of weeks), so
/// a date is evaluated in the same place of the cycle 2000-2399: a short schedule minute
/// reaches wall times thousands of years ahead, beyond what the cron parser searches (and
/// beyond any time zone's known rules), and the pattern matches them just the same there.
const CYCLE_SECS: i64 = 146_097 * 86_400;
/// 2000-01-01T00:00:00Z, where the cycle dates are folded into begins.
const CYCLE_BASE_SECS: i64 = 946_684_800;

/// Why a schedule's fields were refused (each a 400 with its own code).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    /// Not a 5-field cron pattern, or one that never matches.
    #[error("invalid cron \"{cron}\": {reason}")]
    Cron {
        /// The pattern given.
        cron: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Not an IANA time zone name.
    #[error(
        "unknown timezone \"{0}\" (use an IANA name such as \"UTC\", \"Europe/Paris\" or \"America/New_York\")"
    )]
    Timezone(String),
}

impl SpecError {
    /// The error code of the 400 answer.
    pub fn code(&self) -> &'static str {
        match self {
            SpecError::Cron { .. } => "invalid_cron",
            SpecError::Timezone(_) => "unknown_timezone",
        }
    }
}

/// A schedule's pattern, compiled for its time zone.
#[derive(Debug, Clone)]
pub struct Spec {
    cron: Cron,
    tz: Tz,
}

impl Spec {
    /// Parses a 5-field `cron` in `timezone` (IANA name; `UTC` when absent).
    pub fn parse(cron: &str, timezone: &str) -> Result<Spec, SpecError> {
        let bad = |reason: String| SpecError::Cron {
            cron: cron.to_string(),
            reason,
        };
        let fields = cron.split_whitespace().count();
        if fields != 5 {
            return Err(bad(format!(
                "it has {fields} fields; a schedule takes 5 (minute hour day-of-month month day-of-week, e.g. \"*/15 * * * *\")"
            )));
        }
        if cron.contains('@') {
            return Err(bad(
                "nicknames such as @hourly are not taken; write the 5 fields".into(),
            ));
        }
        let parsed = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(cron)
            .map_err(|e| bad(e.to_string()))?;
        let tz = Tz::from_str(timezone).map_err(|_| SpecError::Timezone(timezone.to_string()))?;
        let spec = Spec { cron: parsed, tz };
        if spec.next_after(0).is_none() {
            return Err(bad("it never matches a date".into()));
        }
        Ok(spec)
    }

    /// The first schedule minute after `minute` that the pattern matches (`None`: none ever
    /// does, or it is beyond what the clock can count).
    pub fn next_after(&self, minute: u64) -> Option<u64> {
        let secs = i64::try_from(minute).ok()?.checked_mul(60)?;
        // Folded into 2000-2399 (see `CYCLE_SECS`), evaluated there, and unfolded.
        let cycles = (secs - CYCLE_BASE_SECS).div_euclid(CYCLE_SECS);
        let shift = cycles.checked_mul(CYCLE_SECS)?;
        let utc = DateTime::<Utc>::from_timestamp(secs.checked_sub(shift)?, 0)?;
        let at: DateTime<Tz> = self.tz.from_utc_datetime(&utc.naive_utc());
        let next = self.cron.find_next_occurrence(&at, false).ok()?;
        u64::try_from(next.timestamp().checked_add(shift)?.div_euclid(60)).ok()
    }
}

/// The schedule minute of `unix_ms` on a clock whose minutes last `minute_ms`.
pub fn minute_of(unix_ms: u64, minute_ms: u64) -> u64 {
    unix_ms / minute_ms.max(1)
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_fields_only_and_clear_errors() {
        let e = Spec::parse("* * * *", "UTC").unwrap_err();
        assert_eq!(e.code(), "invalid_cron");
        assert!(e.to_string().contains("4 fields"), "{e}");
        assert!(Spec::parse("0 * * * * *", "UTC").is_err());
        assert!(Spec::parse("61 * * * *", "UTC").is_err());
        assert!(Spec::parse("@hourly x y z w", "UTC").is_err());
        let e = Spec::parse("0 0 30 2 *", "UTC").unwrap_err();
        assert!(e.to_string().contains("never matches"), "{e}");
        let e = Spec::parse("* * * * *", "Mars/Olympus").unwrap_err();
        assert_eq!(e.code(), "unknown_timezone");
    }

    #[test]
    fn minutes_are_judged_as_wall_time_in_the_zone() {
        let every = Spec::parse("* * * * *", "UTC").unwrap();
        assert_eq!(every.next_after(100), Some(101));
        // 00:30 every day; minute 0 is 1970-01-01 00:00 UTC.
        let daily = Spec::parse("30 0 * * *", "UTC").unwrap();
        assert_eq!(daily.next_after(0), Some(30));
        assert_eq!(daily.next_after(30), Some(30 + 1440));
        // In Paris (UTC+1 in January), 00:30 local is 23:30 UTC the day before.
        let paris = Spec::parse("30 0 * * *", "Europe/Paris").unwrap();
        assert_eq!(paris.next_after(0), Some(23 * 60 + 30));
        assert_eq!(minute_of(125_000, 60_000), 2);
        assert_eq!(minute_of(999, 500), 1);
    }

    #[test]
    fn far_future_minutes_of_a_short_clock_still_match() {
        // A 300 ms minute puts today some 11,000 years after the epoch.
        let now = minute_of(1_780_000_000_000, 300);
        let every = Spec::parse("* * * * *", "UTC").unwrap();
        assert_eq!(every.next_after(now), Some(now + 1));
        let hourly = Spec::parse("0 * * * *", "America/New_York").unwrap();
        let next = hourly.next_after(now).unwrap();
        assert!(
            next > now && next <= now + 60 && next.is_multiple_of(60),
            "{now} -> {next}"
        );
        // Fridays stay Fridays once unfolded.
        let fridays = Spec::parse("0 0 * * 5", "UTC").unwrap();
        let m = fridays.next_after(now).unwrap();
        assert!(m > now && m <= now + 7 * 1440, "{now} -> {m}");
        let days = i64::try_from(m / 1440).unwrap();
        assert_eq!((days + 4).rem_euclid(7), 5, "1970-01-01 was a Thursday");
    }
}
