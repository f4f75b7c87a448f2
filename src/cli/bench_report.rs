//! `rookery bench --report FILE.html`: checks the path before the run (a long run must not end
//! in "no such directory") and writes the page [`crate::bench::report_html`] renders from the
//! run's report.
//!
//! It owns the file, not the page (that is `src/bench/report_html.rs`) nor the figures.

use std::path::Path;

use serde_json::Value;

use super::CliError;
use crate::bench::report_html;

/// A usage error (exit 2) unless `path` can be a file in an existing directory.
pub(super) fn check_path(path: &Path) -> Result<(), CliError> {
    if path.as_os_str().is_empty() {
        return Err(CliError::usage(
            "--report needs a file name, e.g. bench.html",
        ));
    }
    if path.is_dir() {
        return Err(CliError::usage(format!(
            "--report {}: a directory; give a file name, e.g. {}",
            path.display(),
            path.join("bench.html").display()
        )));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "--report {}: the directory {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// Renders `report` and writes it to `path` (exit 1 when it cannot).
pub(super) fn write(path: &Path, report: &Value) -> Result<(), CliError> {
    let page = report_html::render(report).map_err(|e| CliError::Io {
        what: "cannot draw the report".to_string(),
        source: std::io::Error::other(e),
        code: 1,
    })?;
    std::fs::write(path, page).map_err(|source| CliError::Io {
        what: format!("cannot write the report {}", path.display()),
        source,
        code: 1,
    })?;
    errln!("rookery: report written to {}", path.display());
    Ok(())
}
