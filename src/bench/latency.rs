//! The latency figures of a workload's tool calls as the `--json` report carries them: the
//! percentiles (nearest rank) and a histogram on a 1-2-5 scale of microseconds, from the
//! sorted latencies the run measured.
//!
//! It only summarises numbers; it neither measures nor renders.

use serde_json::{Map, Value, json};

use super::measure::percentile;

/// The percentiles reported, as `tool_call_p{N}_us`.
const PERCENTILES: [u32; 4] = [50, 90, 99, 100];

/// The next bucket edge above `edge` on the 1-2-5 scale (1, 2, 5, 10, 20, 50, …).
fn next_edge(edge: u64) -> u64 {
    let mut decade = 1;
    while decade * 10 <= edge {
        decade *= 10;
    }
    match edge / decade {
        1 => 2 * decade,
        2..=4 => 5 * decade,
        _ => 10 * decade,
    }
}

/// The largest 1-2-5 edge at or below `v` (1 for 0).
fn edge_below(v: u64) -> u64 {
    let mut edge = 1;
    while next_edge(edge) <= v {
        edge = next_edge(edge);
    }
    edge
}

/// `(from_us, to_us, count)` buckets from the one holding the smallest value to the one holding
/// the largest: `from_us <= v < to_us` (the first also holds values below 1 µs).
pub(crate) fn histogram(sorted_us: &[u64]) -> Vec<(u64, u64, u64)> {
    let (Some(&min), Some(&max)) = (sorted_us.first(), sorted_us.last()) else {
        return Vec::new();
    };
    let mut buckets = Vec::new();
    let mut from = edge_below(min);
    let mut rest = sorted_us;
    loop {
        let to = next_edge(from);
        let n = rest.partition_point(|&v| v < to);
        buckets.push((from, to, n as u64));
        rest = &rest[n..];
        if max < to {
            return buckets;
        }
        from = to;
    }
}

/// The figures of the report: `tool_calls_measured`, `tool_call_p50_us` … `tool_call_p100_us`
/// (the largest), and `tool_call_histogram` (`[{from_us, to_us, count}]`).
pub(crate) fn figures(sorted_us: &[u64]) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("tool_calls_measured".into(), json!(sorted_us.len()));
    for p in PERCENTILES {
        out.insert(
            format!("tool_call_p{p}_us"),
            json!(percentile(sorted_us, f64::from(p))),
        );
    }
    let buckets: Vec<Value> = histogram(sorted_us)
        .into_iter()
        .map(|(from, to, count)| json!({"from_us": from, "to_us": to, "count": count}))
        .collect();
    out.insert("tool_call_histogram".into(), Value::Array(buckets));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_follow_one_two_five() {
        let mut e = 1;
        let mut seen = vec![];
        for _ in 0..7 {
            seen.push(e);
            e = next_edge(e);
        }
        assert_eq!(seen, [1, 2, 5, 10, 20, 50, 100]);
        assert_eq!(edge_below(0), 1);
        assert_eq!(edge_below(37), 20);
        assert_eq!(edge_below(50), 50);
        assert_eq!(edge_below(999), 500);
    }

    #[test]
    fn every_value_lands_in_one_bucket() {
        let v = [3, 4, 12, 12, 19, 20, 480];
        let h = histogram(&v);
        assert_eq!(h.first(), Some(&(2, 5, 2)));
        assert_eq!(h.iter().map(|b| b.2).sum::<u64>(), v.len() as u64);
        assert!(h.windows(2).all(|w| w[0].1 == w[1].0));
        assert_eq!(h.last(), Some(&(200, 500, 1)));
        assert!(histogram(&[]).is_empty());
        let f = figures(&v);
        assert_eq!(f["tool_call_p50_us"], json!(12));
        assert_eq!(f["tool_call_p100_us"], json!(480));
        assert_eq!(f["tool_calls_measured"], json!(7));
    }
}
