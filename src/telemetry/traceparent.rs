//! W3C Trace Context `traceparent` values (`00-<trace id>-<span id>-<flags>`): parsed from a
//! request header or a variable, written into outgoing requests and commands' environments.
//!
//! Plain text handling only; whether a value is used is the caller's choice.

/// A parsed `traceparent`: version 00, a non-zero trace id and span id, and the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace id (16 bytes).
    pub trace_id: [u8; 16],
    /// The parent span's id (8 bytes).
    pub span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

/// The header (and, upper-cased, the environment variable) that carries it.
pub const HEADER: &str = "traceparent";

/// The environment variable a command gets (`TRACEPARENT`).
pub const ENV: &str = "TRACEPARENT";

fn hex_into(text: &str, out: &mut [u8]) -> Option<()> {
    if text.len() != out.len() * 2 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(())
}

impl TraceParent {
    /// Parses `value`; `None` for anything that is not a valid version-00 `traceparent`
    /// (all-zero ids included), as the W3C spec says a receiver must treat it.
    pub fn parse(value: &str) -> Option<TraceParent> {
        let mut parts = value.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || version != "00" {
            return None;
        }
        let mut tp = TraceParent {
            trace_id: [0; 16],
            span_id: [0; 8],
            flags: 0,
        };
        hex_into(trace, &mut tp.trace_id)?;
        hex_into(span, &mut tp.span_id)?;
        let mut f = [0u8; 1];
        hex_into(flags, &mut f)?;
        tp.flags = f[0];
        if tp.trace_id == [0; 16] || tp.span_id == [0; 8] {
            return None;
        }
        Some(tp)
    }
}

impl std::fmt::Display for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("00-")?;
        for b in self.trace_id {
            write!(f, "{b:02x}")?;
        }
        f.write_str("-")?;
        for b in self.span_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-{:02x}", self.flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_values_round_trip_and_bad_ones_are_refused() {
        let v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tp = TraceParent::parse(v).unwrap();
        assert_eq!(tp.to_string(), v);
        assert_eq!(tp.flags, 1);
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad}");
        }
    }
}
