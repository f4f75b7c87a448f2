//! `--store URL` and `--lease-ttl SECS`, the flags that put a command's sessions in the
//! `postgres` trace store instead of the files under the Rookery home, and the host they start.
//!
//! It owns the flags and their resolution (`$ROOKERY_STORE`); the store itself is `src/store/`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::CliError;
use crate::Host;
use crate::store::{PgStore, StoreOptions};
use crate::trace::store_choice::StoreChoice;

/// Where a command's sessions live.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArgs {
    /// The trace store: `files` (the JSONL files under the home, the default) or a
    /// `postgres://USER@HOST:PORT/DB` URL (default: $ROOKERY_STORE, else files).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// With a postgres store: seconds a session's lease lasts unless renewed (renewed every
    /// third of it); a node that cannot renew it stops the session (default 10).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_ttl: Option<u64>,
}

impl StoreArgs {
    /// The chosen store, connected and migrated; `None` for the files.
    pub async fn connect(&self) -> Result<Option<PgStore>, CliError> {
        self.connect_as(None).await
    }

    /// Whether the chosen store is a postgres one (`$ROOKERY_STORE` counts); nothing is
    /// connected.
    pub fn is_postgres(&self) -> Result<bool, CliError> {
        let choice = StoreChoice::resolve(self.store.as_deref())
            .map_err(|e| CliError::usage(e.to_string()))?;
        Ok(matches!(choice, StoreChoice::Postgres(_)))
    }

    /// [`Self::connect`], the sessions' `owner_node` being `node` (default: `<host>-<pid>`).
    pub async fn connect_as(&self, node: Option<&str>) -> Result<Option<PgStore>, CliError> {
        let choice = StoreChoice::resolve(self.store.as_deref())
            .map_err(|e| CliError::usage(e.to_string()))?;
        let url = match choice {
            StoreChoice::Files => {
                if self.lease_ttl.is_some() {
                    return Err(CliError::usage(
                        "--lease-ttl: only with a postgres store (--store postgres://…)",
                    ));
                }
                return Ok(None);
            }
            StoreChoice::Postgres(url) => url,
        };
        let mut options = StoreOptions::default();
        if let Some(node) = node {
            options.node = node.to_string();
        }
        if let Some(secs) = self.lease_ttl {
            options.lease_ttl = Duration::from_secs(secs);
        }
        let store = PgStore::connect(&url, options)
            .await
            .map_err(|e| CliError::Start(e.into()))?;
        Ok(Some(store))
    }

    /// A host on the chosen store.
    pub async fn host(&self, home: PathBuf) -> Result<Host, CliError> {
        let started = match self.connect().await? {
            Some(store) => Host::start_with_store(home, store).await,
            None => Host::start(home).await,
        };
        started.map_err(CliError::Start)
    }
}
