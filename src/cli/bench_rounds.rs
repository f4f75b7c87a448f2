//! `rookery bench --rounds R`: the reports of R interleaved rounds of the workload (each with
//! its floors) combined into one: every number is the median of its rounds, `ok` holds when
//! every round passed, and the rounds' own reports follow under `per_round` (the only place of
//! their series and histograms, which have no median).
//!
//! It owns only the combining; it must not run anything (`bench.rs` runs the rounds).

use serde_json::{Map, Value, json};

/// One report of `rounds`: the median of each number (the mean of the middle two for an even
/// count, to 3 decimals; a whole median of counts stays an integer), `ok` of all, any other
/// plain value as the first round has it (lists and objects stay in the rounds), then `rounds`
/// and `per_round`.
pub(super) fn combine(rounds: Vec<Value>) -> Value {
    let mut out = Map::new();
    if let Some(Value::Object(first)) = rounds.first() {
        for (key, value) in first {
            let combined = match value {
                Value::Number(_) => {
                    let numbers: Vec<&Value> = rounds.iter().filter_map(|r| r.get(key)).collect();
                    let counts = numbers.iter().all(|n| n.is_u64());
                    match median(numbers.iter().filter_map(|n| n.as_f64())) {
                        // A count stays a count when its median is whole (files, writes).
                        Some(m) if counts && m.fract() == 0.0 && m >= 0.0 => json!(m as u64),
                        Some(m) => json!(m),
                        None => Value::Null,
                    }
                }
                Value::Bool(_) => Value::Bool(
                    rounds
                        .iter()
                        .all(|r| r.get(key).and_then(Value::as_bool).unwrap_or(false)),
                ),
                // A series or a histogram has no median: each round's stays in `per_round`.
                Value::Array(_) | Value::Object(_) => continue,
                other => other.clone(),
            };
            out.insert(key.clone(), combined);
        }
    }
    out.insert("rounds".into(), json!(rounds.len()));
    out.insert("per_round".into(), Value::Array(rounds));
    Value::Object(out)
}

/// The text line that follows the combined report: the rounds and the ratios of each.
pub(super) fn summary_line(v: &Value) -> Option<String> {
    let rounds = v.get("per_round")?.as_array()?;
    let series = |key: &str| -> Option<String> {
        let values: Vec<String> = rounds
            .iter()
            .map(|r| r.get(key).map_or("-".to_string(), Value::to_string))
            .collect();
        v.get(key)?;
        Some(format!("{key} {}", values.join(", ")))
    };
    let mut parts = vec![series("calls_per_s")?];
    parts.extend(
        [
            "ratio_calls_per_s_to_http_floor",
            "ratio_wall_to_concurrent_floor",
        ]
        .into_iter()
        .filter_map(series),
    );
    Some(format!(
        "rounds               {} interleaved, medians above; per round: {}",
        rounds.len(),
        parts.join("; ")
    ))
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    let m = if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    };
    Some((m * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_medians_ok_is_all_and_the_rounds_follow() {
        let rounds = vec![
            json!({"workload": "read", "ok": true, "calls_per_s": 300.0, "ratio": 0.5, "series": {"t_ms": [1]}}),
            json!({"workload": "read", "ok": false, "calls_per_s": 100.0, "ratio": 0.7}),
            json!({"workload": "read", "ok": true, "calls_per_s": 200.0, "ratio": 0.6}),
        ];
        let v = combine(rounds.clone());
        assert_eq!(v["calls_per_s"], json!(200.0));
        assert_eq!(v["ratio"], json!(0.6));
        assert_eq!(v["ok"], json!(false));
        assert_eq!(v["workload"], json!("read"));
        assert!(v.get("series").is_none());
        assert_eq!(v["rounds"], json!(3));
        assert_eq!(v["per_round"], Value::Array(rounds));
        let line = summary_line(&v).unwrap();
        assert!(line.contains("3 interleaved"), "{line}");
        assert!(line.contains("calls_per_s 300.0, 100.0, 200.0"), "{line}");
    }

    #[test]
    fn an_even_count_takes_the_mean_of_the_middle_two() {
        let v = combine(vec![
            json!({"x": 1, "ok": true}),
            json!({"x": 4, "ok": true}),
            json!({"x": 2, "ok": true}),
            json!({"x": 10, "ok": true}),
        ]);
        assert_eq!(v["x"], json!(3));
        assert_eq!(v["ok"], json!(true));
        let v = combine(vec![json!({"x": 1}), json!({"x": 2})]);
        assert_eq!(v["x"], json!(1.5));
    }
}
