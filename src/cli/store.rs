//! `rookery store migrate|export ID|import HOME`, and `rookery sessions list` on a postgres
//! store. Every subcommand takes `--store URL` (default `$ROOKERY_STORE`).
//!
//! Command line only: the statements are `src/store/`. Exit codes: 0 done; 1 the store
//! failed; 2 usage (no store named, an unknown session).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::CliError;
use crate::store::{PgStore, StoreError, StoreOptions};
use crate::trace::store_choice::{STORE_ENV, StoreChoice};

/// The flags of `rookery store`.
#[derive(Debug, Clone, Args)]
#[command(arg_required_else_help = true)]
pub struct StoreArgs {
    /// The postgres store (default: $ROOKERY_STORE).
    #[arg(long, value_name = "URL", global = true)]
    pub store: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: StoreCommand,
}

/// The subcommands of `rookery store`.
#[derive(Debug, Clone, Subcommand)]
pub enum StoreCommand {
    /// Apply the schema's missing migrations (done by every command at start, too).
    Migrate,
    /// Write a session's trace to stdout as JSONL, as the files backend has it.
    Export {
        /// The session id.
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Load every session trace of a files home (idempotent: a repeat changes nothing).
    Import {
        /// The Rookery home to read (`<HOME>/traces/…`).
        #[arg(value_name = "HOME")]
        home: PathBuf,
    },
}

/// The postgres URL `flag` (or `$ROOKERY_STORE`) names; anything else is a usage error.
fn postgres_url(flag: Option<&str>, what: &str) -> Result<String, CliError> {
    match StoreChoice::resolve(flag).map_err(|e| CliError::usage(e.to_string()))? {
        StoreChoice::Postgres(url) => Ok(url),
        StoreChoice::Files => Err(CliError::usage(format!(
            "{what}: needs a postgres store: pass --store postgres://USER@HOST:PORT/DB or set ${STORE_ENV}"
        ))),
    }
}

fn failed(e: StoreError) -> CliError {
    CliError::Failed(e.into())
}

/// `rookery store`.
pub async fn store(args: StoreArgs) -> Result<ExitCode, CliError> {
    let url = postgres_url(args.store.as_deref(), "rookery store")?;
    match args.command {
        StoreCommand::Migrate => {
            let store = PgStore::connect_unmigrated(&url, StoreOptions::default())
                .map_err(|e| CliError::Start(e.into()))?;
            let mut client = store.client().await.map_err(failed)?;
            let applied = crate::store::migrate::migrate(&mut client)
                .await
                .map_err(failed)?;
            let latest = crate::store::migrate::latest();
            if applied.is_empty() {
                eprintln!("the store's schema is up to date (version {latest})");
            } else {
                eprintln!("applied migrations {applied:?}; the schema is at version {latest}");
            }
        }
        StoreCommand::Export { id } => {
            export_stored(&connect(&url).await?, &id).await?;
        }
        StoreCommand::Import { home } => {
            let store = connect(&url).await?;
            let done = crate::store::import::import(&store, &home)
                .await
                .map_err(failed)?;
            eprintln!(
                "imported {} sessions from {}: {} new sessions, {} new records",
                done.sessions,
                home.display(),
                done.new_sessions,
                done.new_records
            );
            import_schedules(&store, &home).await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Stores the schedules of the `files` home `home` (its `schedules.json`, or what its traces
/// record when there is none) for the sessions the store has, and says what it did.
async fn import_schedules(store: &PgStore, home: &std::path::Path) -> Result<(), CliError> {
    use crate::server::{schedule_index, schedule_store, schedules};
    let loaded = schedule_index::load(home).map_err(|e| match e {
        schedule_index::IndexError::Scan(e) => CliError::Catalog(e),
        schedule_index::IndexError::Read { path, source }
        | schedule_index::IndexError::Write { path, source } => CliError::Io {
            what: format!("cannot read the schedule index {}", path.display()),
            source,
            code: 1,
        },
    })?;
    if loaded.schedules.is_empty() {
        return Ok(());
    }
    let minute_ms = loaded.minute_ms.unwrap_or(schedules::DEFAULT_MINUTE_MS);
    let limits = (schedules::MAX_PER_SESSION, schedules::MAX_TOTAL);
    let done = schedule_store::import(store, loaded.schedules, minute_ms, limits)
        .await
        .map_err(failed)?;
    eprintln!(
        "schedules: {} new, {} already stored, {} of sessions not in the store, {} over a limit",
        done.new, done.present, done.no_session, done.refused
    );
    Ok(())
}

/// Stored session `id`'s last own `session_meta` (a subagent's, which carry an origin, are
/// skipped); `None` when it recorded none that parses.
pub async fn stored_last_meta(
    store: &PgStore,
    id: &str,
) -> Result<Option<crate::message::SessionMeta>, CliError> {
    use crate::message::{OmniMessage, Payload};
    let records = crate::store::records::meta_records(store, id)
        .await
        .map_err(failed)?;
    Ok(records
        .iter()
        .filter_map(|r| std::str::from_utf8(r).ok())
        .filter_map(|line| OmniMessage::from_json(line.trim_end()).ok())
        .filter(|r| !r.has_origin())
        .find_map(|r| match r.payload {
            Payload::SessionMeta(m) => Some(*m),
            _ => None,
        }))
}

/// Writes stored session `id`'s trace to stdout as JSONL (`store export`, `sessions show
/// --json`).
pub async fn export_stored(store: &PgStore, id: &str) -> Result<ExitCode, CliError> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
    match crate::store::export::export(store, id, &mut out).await {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(StoreError::UnknownSession(id)) => Err(CliError::usage(format!(
            "{id}: no session {id} in the store (a stored session is named by its whole id)"
        ))),
        Err(e) => Err(failed(e)),
    }
}

/// `rookery sessions rm ID --store URL`: deletes a stored session and its subagents (asked
/// first on a terminal; `--yes` otherwise), refused while a node holds its lease.
pub async fn rm_stored(store: &PgStore, id: &str, yes: bool) -> Result<ExitCode, CliError> {
    use std::io::{BufRead, IsTerminal};
    if !crate::store::records::exists(store, id)
        .await
        .map_err(failed)?
    {
        return Err(CliError::usage(format!(
            "{id}: no session {id} in the store (a stored session is named by its whole id)"
        )));
    }
    if !yes {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Err(CliError::usage(format!(
                "not deleting {id} without confirmation and there is no terminal to ask on; \
                 run `rookery sessions rm {id} --yes`"
            )));
        }
        eprint!("Delete session {id} and its subagents from the store? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        if stdin.lock().read_line(&mut answer).is_err()
            || !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
        {
            eprintln!("nothing deleted");
            return Ok(ExitCode::from(1));
        }
    }
    match crate::store::removal::remove(store, id).await {
        Ok(r) => {
            let _ = writeln!(
                std::io::stdout().lock(),
                "deleted session {id} from the store ({} sessions, {} records)",
                r.sessions,
                r.records
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(StoreError::UnknownSession(id)) => Err(CliError::usage(format!(
            "{id}: no session {id} in the store"
        ))),
        Err(e @ StoreError::Leased { .. }) => Err(CliError::usage(e.to_string())),
        Err(e) => Err(failed(e)),
    }
}

/// `rookery sessions fork ID [--at-task N] --store URL`: stores a fork of a stored session
/// (not held by anyone) and prints its id.
pub async fn fork_stored(
    store: &PgStore,
    id: &str,
    at_task: Option<u64>,
) -> Result<ExitCode, CliError> {
    use crate::store::fork::StoredForkError;
    use crate::trace::fork::ForkError;
    let forked = crate::store::fork::fork(store, id, at_task, &Default::default()).await;
    match forked {
        Ok(f) => {
            let _ = writeln!(std::io::stdout().lock(), "{}", f.session_id);
            Ok(ExitCode::SUCCESS)
        }
        Err(StoredForkError::Store(StoreError::UnknownSession(id))) => {
            Err(CliError::usage(format!(
                "{id}: no session {id} in the store (a stored session is named by its whole id)"
            )))
        }
        Err(StoredForkError::Fork(
            e @ (ForkError::NoSuchTask { .. } | ForkError::NoCompletedTask(_)),
        )) => Err(CliError::usage(e.to_string())),
        Err(StoredForkError::Fork(e)) => Err(CliError::Failed(e.into())),
        Err(StoredForkError::Store(e)) => Err(failed(e)),
    }
}

async fn connect(url: &str) -> Result<PgStore, CliError> {
    PgStore::connect(url, StoreOptions::default())
        .await
        .map_err(|e| CliError::Start(e.into()))
}

/// Sessions a listing of the store shows at most.
const LIST_LIMIT: i64 = 1000;

/// `rookery sessions list --store URL`: the newest sessions of the store, a table or (with
/// `json`) one JSON object a line.
pub async fn list_stored(
    store: &PgStore,
    json: bool,
    owner: Option<&str>,
) -> Result<ExitCode, CliError> {
    let sessions = match owner {
        Some(owner) => crate::store::listing::list_owned(store, owner, LIST_LIMIT).await,
        None => crate::store::listing::list(store, LIST_LIMIT).await,
    }
    .map_err(failed)?;
    let mut stdout = std::io::stdout().lock();
    if json {
        for s in &sessions {
            let line = serde_json::json!({
                "id": s.id,
                "parent": s.parent,
                "status": s.status,
                "workspace": s.workspace,
                "model": s.model,
                "tool_profile": s.tool_profile,
                "started": s.created_at,
                "last_activity": s.last_activity,
                "owner_node": s.owner_node,
                "epoch": s.epoch,
            });
            if writeln!(stdout, "{line}").is_err() {
                return Ok(ExitCode::SUCCESS);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.is_empty() {
        eprintln!("no sessions in the store");
        return Ok(ExitCode::SUCCESS);
    }
    let _ = writeln!(stdout, "ID  STATUS  LAST ACTIVITY  PROFILE  MODEL  NODE");
    for s in &sessions {
        let line = format!(
            "{}  {}  {}  {}  {}  {}",
            s.id,
            s.status,
            local_time(&s.last_activity),
            s.tool_profile,
            s.model,
            s.owner_node.as_deref().unwrap_or("-")
        );
        if writeln!(stdout, "{line}").is_err() {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The workspace recorded for stored session `id` (`chat --resume ID --store URL`).
pub async fn stored_workspace(store: &PgStore, id: &str) -> Result<String, CliError> {
    match crate::store::listing::workspace(store, id).await {
        Ok(Some(w)) => Ok(w),
        Ok(None) => Err(CliError::usage(format!(
            "--resume {id}: no session {id} in the store (a stored session is named by its whole id)"
        ))),
        Err(e) => Err(CliError::Start(e.into())),
    }
}

/// A stored UTC time as local `YYYY-MM-DD HH:MM:SS` (as `sessions list` shows file traces).
fn local_time(ts: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(ts) {
        Ok(t) => t
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string(),
        Err(_) => ts.to_string(),
    }
}
