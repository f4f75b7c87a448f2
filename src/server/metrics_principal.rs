//! The per-principal series of `/metrics`: tasks started through the API and resident sessions
//! (and those running) by `principal`. A label is a name from `--auth FILE` (`admin` without
//! it), or `other` for every subject the file does not list and for sessions with no listed
//! owner: never a value taken from a request, so the series stay bounded by the file.
//!
//! Observation only: it counts and renders; it never changes a session.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use super::principal::{DEFAULT_ADMIN, Principals, UNLISTED_LABEL};

/// Tasks started, by principal label.
#[derive(Default)]
pub struct PrincipalCounters(Mutex<BTreeMap<String, u64>>);

/// Resident and running sessions of one principal label, sampled at render time.
#[derive(Debug, Default, Clone, Copy)]
pub struct PrincipalGauge {
    /// Sessions served (resident).
    pub resident: u64,
    /// Of them, running a task.
    pub running: u64,
}

/// The label of a session whose `session_meta.owner` is `owner`.
pub fn owner_label(principals: Option<&Principals>, owner: Option<&str>) -> String {
    let listed = match (principals, owner) {
        (Some(dir), Some(name)) => dir.by_name(name).is_some(),
        (None, Some(name)) => name == DEFAULT_ADMIN,
        (_, None) => false,
    };
    match owner {
        Some(name) if listed => name.to_string(),
        _ => UNLISTED_LABEL.to_string(),
    }
}

impl PrincipalCounters {
    /// Counts a task started by the principal labelled `label`.
    pub fn task_started(&self, label: &str) {
        if let Ok(mut m) = self.0.lock() {
            *m.entry(label.to_string()).or_default() += 1;
        }
    }

    /// The series, in the Prometheus text format (ends with a newline when not empty).
    pub fn render(&self, gauges: &BTreeMap<String, PrincipalGauge>) -> String {
        let esc = |v: &str| {
            v.replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n")
        };
        let mut out = String::new();
        let counts = self.0.lock().map(|m| m.clone()).unwrap_or_default();
        if !counts.is_empty() {
            out.push_str("# HELP rookery_principal_tasks_started_total Tasks started through the API, by principal.\n# TYPE rookery_principal_tasks_started_total counter\n");
            for (label, n) in &counts {
                let _ = writeln!(
                    out,
                    "rookery_principal_tasks_started_total{{principal=\"{}\"}} {n}",
                    esc(label)
                );
            }
        }
        if !gauges.is_empty() {
            out.push_str("# HELP rookery_principal_sessions Resident sessions by principal and status.\n# TYPE rookery_principal_sessions gauge\n");
            for (label, g) in gauges {
                let label = esc(label);
                let _ = writeln!(
                    out,
                    "rookery_principal_sessions{{principal=\"{label}\",status=\"resident\"}} {}",
                    g.resident
                );
                let _ = writeln!(
                    out,
                    "rookery_principal_sessions{{principal=\"{label}\",status=\"running\"}} {}",
                    g.running
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_listed_names_or_other() {
        assert_eq!(owner_label(None, Some("admin")), "admin");
        assert_eq!(owner_label(None, Some("bob")), "other");
        assert_eq!(owner_label(None, None), "other");
        let dir = crate::server::auth_file::parse(
            std::path::Path::new("a.yaml"),
            "principals:\n  - name: alice\n",
        )
        .unwrap();
        assert_eq!(owner_label(Some(&dir), Some("alice")), "alice");
        assert_eq!(owner_label(Some(&dir), Some("mallory\"}")), "other");
        let c = PrincipalCounters::default();
        c.task_started("alice");
        c.task_started("alice");
        let mut g = BTreeMap::new();
        g.insert(
            "alice".to_string(),
            PrincipalGauge {
                resident: 2,
                running: 1,
            },
        );
        let text = c.render(&g);
        assert!(text.contains("rookery_principal_tasks_started_total{principal=\"alice\"} 2\n"));
        assert!(
            text.contains("rookery_principal_sessions{principal=\"alice\",status=\"running\"} 1\n")
        );
    }
}
