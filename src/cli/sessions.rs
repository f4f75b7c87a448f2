//! `rookery sessions list|show|rm|fork`: find, read, delete and fork the sessions recorded under a Rookery
//! home.
//!
//! Command line only: scanning, summaries, id resolution and deletion are
//! `crate::trace::catalog`; the readable transcript is `sessions/show.rs` (from the postgres
//! store: `sessions/show_stored.rs`). This module never
//! writes into a trace. Exit codes: 0 done; 1 `rm` declined or a file could not be deleted;
//! 2 usage errors (unknown or ambiguous id, a home that is not a directory, `rm` with no
//! terminal and no `--yes`), each one line on stderr.

mod fork;
mod show;
mod show_stored;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::CliError;
use crate::trace::catalog::{Catalog, remove_files};
use crate::trace::paths;
use crate::trace::summary::{RecordedStatus, SessionSummary};

/// The flags of `rookery sessions`.
#[derive(Debug, Clone, Args)]
#[command(arg_required_else_help = true)]
pub struct SessionsArgs {
    /// Where traces are (default: $ROOKERY_HOME, else ~/.rookery).
    #[arg(long, value_name = "DIR", global = true)]
    pub home: Option<PathBuf>,
    /// The trace store: `files` (default) or a postgres URL (default: $ROOKERY_STORE); with a
    /// postgres store a session is named by its whole id.
    #[arg(long, value_name = "URL", global = true)]
    pub store: Option<String>,
    /// What to do with the recorded sessions.
    #[command(subcommand)]
    pub command: SessionsCommand,
}

/// The subcommands of `rookery sessions`.
#[derive(Debug, Clone, Subcommand)]
pub enum SessionsCommand {
    /// List the recorded sessions, newest first (subagents only with --all).
    #[command(visible_alias = "ls")]
    List(ListArgs),
    /// Print a session's transcript, its subagents indented under their call.
    Show(ShowArgs),
    /// Delete a session's trace files and those of its subagents.
    Rm(RmArgs),
    /// Fork a session at the end of a task: a new session with its own id and trace.
    Fork(fork::ForkArgs),
}

/// The flags of `rookery sessions list`.
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// One JSON object per session and line.
    #[arg(long)]
    pub json: bool,
    /// Also list subagent sessions (under the session that started them).
    #[arg(long)]
    pub all: bool,
    /// Only the sessions of this `rookery serve --auth` principal (`session_meta.owner`).
    #[arg(long, value_name = "NAME")]
    pub owner: Option<String>,
}

/// The flags of `rookery sessions show`.
#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// A session id, or a unique abbreviation of it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Print the trace records verbatim, one JSON line each.
    #[arg(long)]
    pub json: bool,
}

/// The flags of `rookery sessions rm`.
#[derive(Debug, Clone, Args)]
pub struct RmArgs {
    /// A session id, or a unique abbreviation of it.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Delete without asking (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// Characters of the first prompt line shown by `list`.
const PROMPT_WIDTH: usize = 60;

/// `rookery sessions`: lists, shows or deletes recorded sessions.
pub async fn sessions(args: SessionsArgs) -> Result<ExitCode, CliError> {
    let store = super::store_args::StoreArgs {
        store: args.store.clone(),
        lease_ttl: None,
    };
    if let Some(store) = store.connect().await? {
        return match &args.command {
            SessionsCommand::List(list) => {
                super::store::list_stored(&store, list.json, list.owner.as_deref()).await
            }
            SessionsCommand::Show(show) if show.json => {
                super::store::export_stored(&store, &show.id).await
            }
            SessionsCommand::Show(show) => show_stored::show_stored(&store, &show.id).await,
            SessionsCommand::Rm(rm) => super::store::rm_stored(&store, &rm.id, rm.yes).await,
            SessionsCommand::Fork(f) => super::store::fork_stored(&store, &f.id, f.at_task).await,
        };
    }
    let home = paths::rookery_home(args.home.as_deref());
    let catalog = Catalog::scan(&home)?;
    match args.command {
        SessionsCommand::List(list) => Ok(list_sessions(&catalog, &list)),
        SessionsCommand::Show(show) => show_session(&catalog, &show),
        SessionsCommand::Rm(rm) => rm_session(&catalog, &rm),
        SessionsCommand::Fork(f) => fork::fork_session(&catalog, &f),
    }
}

// ---------------------------------------------------------------------------------------------
// list
// ---------------------------------------------------------------------------------------------

/// The rows of `list`: top-level sessions newest first (a subagent whose parent is gone counts
/// as top level); with `all`, each followed by its subagents and its forks (and theirs), marked
/// as such (a fork whose origin is gone, or any fork without `all`, is listed at top level).
fn rows(summaries: &[SessionSummary], all: bool) -> Vec<(bool, &SessionSummary)> {
    let known = |id: &String| summaries.iter().any(|s| &s.id == id);
    let under_origin = |s: &SessionSummary| all && s.forked_from.as_ref().is_some_and(known);
    let top: Vec<&SessionSummary> = summaries
        .iter()
        .filter(|s| (!s.is_subagent() || s.parent.is_none()) && !under_origin(s))
        .collect();
    let mut out = Vec::new();
    for parent in top {
        out.push((false, parent));
        if all {
            children(summaries, parent, &mut out, 0);
        }
    }
    out
}

/// Pushes the subagents of `parent`, then its forks each followed by their own, as child rows.
fn children<'a>(
    summaries: &'a [SessionSummary],
    parent: &SessionSummary,
    out: &mut Vec<(bool, &'a SessionSummary)>,
    depth: usize,
) {
    for child in &parent.subagents {
        if let Some(c) = summaries.iter().find(|s| &s.id == child) {
            out.push((true, c));
        }
    }
    // Forks are newest first like every row; a cycle cannot occur (a fork is younger than its
    // origin), the depth bound only guards against a hand-edited trace.
    if depth > 64 {
        return;
    }
    for fork in summaries
        .iter()
        .filter(|s| s.forked_from.as_deref() == Some(parent.id.as_str()))
    {
        out.push((true, fork));
        children(summaries, fork, out, depth + 1);
    }
}

fn list_sessions(catalog: &Catalog, args: &ListArgs) -> ExitCode {
    let mut summaries = catalog.summaries();
    if let Some(owner) = &args.owner {
        summaries.retain(|s| s.owner.as_deref() == Some(owner.as_str()));
    }
    let rows = rows(&summaries, args.all);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        for (_, s) in &rows {
            let line = serde_json::to_string(s)
                .unwrap_or_else(|e| format!(r#"{{"id":{:?},"error":"{e}"}}"#, s.id));
            if writeln!(stdout, "{line}").is_err() {
                return ExitCode::SUCCESS; // a closed pipe (`| head`) is not an error
            }
        }
        return ExitCode::SUCCESS;
    }
    if rows.is_empty() {
        eprintln!(
            "no sessions under {}",
            catalog.home().join(paths::TRACES_DIR_NAME).display()
        );
        return ExitCode::SUCCESS;
    }
    let mut table: Vec<[String; 7]> = vec![[
        "ID".into(),
        "STATUS".into(),
        "STARTED".into(),
        "LAST ACTIVITY".into(),
        "PROFILE".into(),
        "MODEL".into(),
        "PROMPT".into(),
    ]];
    for (is_child, s) in &rows {
        let id = if *is_child {
            format!("↳ {}", s.id)
        } else {
            s.id.clone()
        };
        table.push([
            id,
            s.status.to_string(),
            local_time(s.started.as_deref()),
            local_time(s.last_activity.as_deref()),
            s.tool_profile.clone(),
            s.model.clone().unwrap_or_else(|| "-".into()),
            truncate(s.first_prompt.as_deref().unwrap_or(""), PROMPT_WIDTH),
        ]);
    }
    let mut widths = [0usize; 7];
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in &table {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        if writeln!(stdout, "{}", line.trim_end()).is_err() {
            return ExitCode::SUCCESS;
        }
    }
    ExitCode::SUCCESS
}

/// A trace timestamp (UTC) as local `YYYY-MM-DD HH:MM:SS`; `-` when absent, as-is when it
/// does not parse.
pub(crate) fn local_time(ts: Option<&str>) -> String {
    let Some(ts) = ts else {
        return "-".into();
    };
    match chrono::DateTime::parse_from_rfc3339(ts) {
        Ok(t) => t
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string(),
        Err(_) => ts.to_string(),
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max - 1).collect();
    out.push('…');
    out
}

// ---------------------------------------------------------------------------------------------
// show
// ---------------------------------------------------------------------------------------------

fn show_session(catalog: &Catalog, args: &ShowArgs) -> Result<ExitCode, CliError> {
    let files = catalog.resolve(&args.id)?;
    let history = crate::trace::catalog::read_history(files)?;
    let lines = if args.json {
        history.lines
    } else {
        show::transcript(catalog, &history)
    };
    let mut stdout = std::io::stdout().lock();
    for line in lines {
        if writeln!(stdout, "{line}").is_err() {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------------
// rm
// ---------------------------------------------------------------------------------------------

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn rm_session(catalog: &Catalog, args: &RmArgs) -> Result<ExitCode, CliError> {
    let target = catalog.resolve(&args.id)?;
    let sets = catalog.files_with_subagents(&target.id)?;
    let files: Vec<PathBuf> = sets.iter().flat_map(|s| s.files.clone()).collect();
    let status = crate::trace::catalog::read_history(target)
        .map(|h| h.summary().status)
        .unwrap_or(RecordedStatus::Unknown);
    let children = sets.len().saturating_sub(1);
    let mut what = format!(
        "session {} ({status}, {}",
        target.id,
        plural(target.files.len(), "trace file", "trace files")
    );
    if children > 0 {
        what.push_str(&format!(
            ", and {} with {}",
            plural(children, "subagent", "subagents"),
            plural(files.len() - target.files.len(), "file", "files")
        ));
    }
    what.push(')');
    if !args.yes {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Err(CliError::usage(format!(
                "not deleting {id} without confirmation and there is no terminal to ask \
                 on; run `rookery sessions rm {id} --yes`",
                id = target.id
            )));
        }
        let running = if status == RecordedStatus::Open {
            " Its last task has no end: it may still be running."
        } else {
            ""
        };
        eprint!("Delete {what}?{running} [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        if stdin.lock().read_line(&mut answer).is_err()
            || !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
        {
            errln!("nothing deleted");
            return Ok(ExitCode::from(1));
        }
    }
    remove_files(&files)?;
    outln!("deleted {what}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_by_characters() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("äöüß", 3), "äö…");
    }

    #[test]
    fn local_time_handles_missing_and_odd_values() {
        assert_eq!(local_time(None), "-");
        assert_eq!(local_time(Some("yesterday")), "yesterday");
        let t = local_time(Some("2026-12-01T08:39:20.421Z"));
        assert_eq!(t.len(), "2026-12-01 08:39:20".len(), "{t}");
        assert!(t.ends_with(":20"), "{t}");
    }
}
