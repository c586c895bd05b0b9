//! One admin tool for any keyspace: a binary in one line of code.
//!
//! ```no_run
//! # microdcs_valkey::keyspace! { pub Shop { documents: [] , seen: hash("seen:{pod}") } }
//! // src/bin/shop-admin.rs
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> std::process::ExitCode {
//!     microdcs_valkey::admin::main::<Shop>().await
//! }
//! ```
//!
//! It connects with the settings of the environment
//! ([`MicroDcsConfig::from_env`](crate::MicroDcsConfig::from_env)) and
//! offers, for every document type the `keyspace!` lists:
//!
//! | Command | What it does | Needs |
//! |---|---|---|
//! | `verify [--kind K] [--index I] [--scope S] [--batch N]` | compares the indexes with the documents; exit 1 on differences | maintenance role |
//! | `rebuild [...]` | rewrites the indexes from the documents (no writer active) | maintenance role |
//! | `inspect kinds\|scopes\|ids\|index\|doc\|dedupe\|lease\|stream\|value ...` | the inspector's read-only views | inspector role |
//! | `mcp` | the inspector as an MCP server on stdin/stdout | inspector role |
//! | `keys` | the key table as Markdown | no server |
//! | `acl --role R --user U` | the `ACL SETUSER` rules of a role | no server |
//! | `lock check\|write [--path P] [--force]` | the schema lock ([`crate::lock`]) | no server |
//! | `migrate plan [--lock P]` | what a migration would do: the lock's changes and the indexes `needs_rebuild` flags | maintenance role |
//! | `migrate status` | the flagged indexes, the building ones, the live writers by schema, and whether a migration runs | maintenance + lease |
//! | `migrate apply [--batch N]` | under the migration lease: backfills each kind with a building index ([`Store::backfill`](crate::Store::backfill)), records the layout of each flagged index that backfill made ready (never rebuilt beside live writers), leaves one still building to the next apply, and rebuilds every other flagged index (the per-scope list, a kind of schema 1); exit 1 when one is still flagged or building | app + maintenance + lease |
//! | `migrate verify` | `verify` of every kind | maintenance role |
//! | `migrate drop --lock P` | removes the keys of the indexes the lock `P` lists and this build no longer declares, once no writer of an older schema keeps them (see below); exit 1 when one was left | app + maintenance + lease |
//! | `migrate finish` | verifies, and records the layouts of every clean kind ([`Store::accept_layouts`](crate::Store::accept_layouts)) under the lease; exit 1 when one is not clean | maintenance + lease |
//!
//! `--json` (before or after the command) prints one JSON document for
//! tools instead of tables. Every command is idempotent: `apply` backfills
//! only kinds with a building index (resuming from the backfill's stored
//! cursor) and rebuilds only what is still flagged, so a second run (or a
//! run after a crash) does the rest and then nothing. While a writer of
//! an older schema is live, the backfill leaves its indexes building and
//! `apply` says so: stop that release, wait `WriterLifetime`, run it again.
//! The tool's stores use the [`Json`](crate::store::Json) codec: a backfill
//! writes a `CompactJson` type's documents in the JSON form, which both
//! codecs read; the service's next write of each stores it compact again. `apply` and `finish` hold the fencing
//! lease `migrate-{keyspace}` ([`crate::lease`]) while they run, renewed
//! at a third of its lifetime: a second operator's `apply` is refused with
//! the time the first one's lease has left, and an `apply` whose lease is
//! lost stops. The lease needs the lease scripts (`EVALSHA`): run them as a
//! user with the maintenance role's rules and the application's lease
//! commands. `apply`'s backfill writes documents through the application's
//! scripts (and announces itself as a writer), so `apply` needs the union
//! of the application's and the maintenance role's rules (`app +
//! maintenance` above).
//!
//! `migrate drop` removes a dropped index's keys only when the kind's
//! `schema` is above the lock's (the release that dropped it raised it, so
//! the writers that keep the index are told apart), no writer of an older
//! schema is live, and the dropped key template overlaps none of this
//! build's; each key is parsed back against the template before it goes,
//! at most `BackfillRate` a second. Otherwise it names the guard and keeps
//! the keys.
//!
//! There is no `migrate abort`: `apply` moves index entries toward the
//! documents and writes documents again as the newest release writes them,
//! so there is nothing to roll back; stop it, and its lease ends with its
//! lifetime (a backfill resumes from its cursor). Rolling the release
//! itself back is safe too: an older release that writes again records
//! the indexes it does not keep as building (chapter 14 of the guide). Types without serde impls (a custom
//! codec) are listed and skipped by the commands that open stores.
//!
//! Exit codes: 0 done and clean, 1 differences found (or a check failed),
//! 2 an error (bad arguments, connection, permissions).

mod apply;
mod drop;
mod kinds;
mod render;

use std::ffi::OsString;
use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use serde_json::json;

use crate::client::Valkey;
use crate::each::EachDocument;
use crate::error::{Error, Result};
use crate::lease::{Acquire, LeaseBackend, LeaseStore};
use crate::store::MaintenanceOptions;
use kinds::Kinds;

/// The admin tool's arguments.
#[derive(Parser, Debug)]
#[command(about = "Admin tool of a microdcs keyspace: verify, rebuild, inspect, migrate")]
struct Cli {
    /// One JSON document for tools instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compare every index with the documents; exit code 1 on differences.
    Verify(MaintArgs),
    /// Rewrite the indexes from the documents (run while no writer is active).
    Rebuild(MaintArgs),
    /// Read-only views of the keyspace (works as the `inspector` ACL user).
    Inspect {
        /// What to show.
        #[command(subcommand)]
        what: Inspect,
    },
    /// Serve the inspector's views as MCP tools on stdin and stdout.
    Mcp,
    /// Print the key table as Markdown (no server needed).
    #[command(alias = "keyspace")]
    Keys,
    /// Print the `ACL SETUSER` rules of a role for the configured prefix.
    Acl {
        /// `app`, `inspector` or `maintenance`.
        #[arg(long)]
        role: String,
        /// The ACL user name.
        #[arg(long)]
        user: String,
    },
    /// The schema lock (no server needed).
    Lock {
        /// `check` or `write`.
        #[command(subcommand)]
        what: LockCmd,
    },
    /// Migration steps: plan, status, apply, verify, finish.
    Migrate {
        /// The step.
        #[command(subcommand)]
        step: Migrate,
    },
}

#[derive(clap::Args, Debug, Clone, Default)]
struct MaintArgs {
    /// Only this scope.
    #[arg(long)]
    scope: Option<String>,
    /// Only this index (`list` or an index name).
    #[arg(long)]
    index: Option<String>,
    /// Only this document kind.
    #[arg(long)]
    kind: Option<String>,
    /// Keys per SCAN batch and pipeline.
    #[arg(long, default_value_t = 500)]
    batch: usize,
}

#[derive(Subcommand, Debug)]
enum LockCmd {
    /// Compare the lock with the code; exit code 1 when they differ.
    Check {
        /// The lock file.
        #[arg(long, default_value = "microdcs.lock")]
        path: std::path::PathBuf,
    },
    /// Write the lock (refused on a breaking change without `--force`).
    Write {
        /// The lock file.
        #[arg(long, default_value = "microdcs.lock")]
        path: std::path::PathBuf,
        /// Write it even over a change that breaks stored data.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand, Debug)]
enum Migrate {
    /// What a migration would do: the lock's changes and the flagged indexes.
    Plan {
        /// The committed lock to compare with the code (none: skip).
        #[arg(long)]
        lock: Option<std::path::PathBuf>,
    },
    /// The flagged indexes and whether a migration is running.
    Status,
    /// Rebuild every flagged index, under the migration lease.
    Apply {
        /// Keys per SCAN batch and pipeline.
        #[arg(long, default_value_t = 500)]
        batch: usize,
    },
    /// Verify every kind.
    Verify,
    /// Verify, and record the layouts of every clean kind, under the lease.
    Finish,
    /// Remove the keys of the indexes the lock lists and this build no
    /// longer declares, under the lease.
    Drop {
        /// The lock written before the indexes were dropped.
        #[arg(long)]
        lock: std::path::PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum Inspect {
    /// Document kinds and every key family.
    Kinds,
    /// Scopes holding documents of a kind.
    Scopes {
        /// Document kind.
        kind: String,
    },
    /// Ids of a kind in a scope, through its list.
    Ids {
        /// Document kind.
        kind: String,
        /// Scope.
        scope: String,
        /// Where to start (0, or the `next` of the previous page).
        #[arg(long, default_value_t = 0)]
        cursor: u64,
        /// Ids per page.
        #[arg(long, default_value_t = 100)]
        count: usize,
    },
    /// Ids through an index.
    Index {
        /// Document kind.
        kind: String,
        /// Index name.
        index: String,
        /// The index template's values, in order.
        values: Vec<String>,
    },
    /// One document: version, op ids, index fields, the document, its index entries.
    Doc {
        /// Document kind.
        kind: String,
        /// Id.
        id: String,
    },
    /// The dedupe claim of an event.
    Dedupe {
        /// Event source.
        source: String,
        /// Event id.
        id: String,
    },
    /// A fencing lease.
    Lease {
        /// Lease name.
        name: String,
    },
    /// The change stream of a kind in a scope (length, groups, pending, lag).
    Stream {
        /// Document kind.
        kind: String,
        /// Scope.
        scope: String,
    },
    /// A value family's key and the time since it was written.
    Value {
        /// Family name.
        family: String,
        /// The template's values, in order.
        values: Vec<String>,
    },
}

impl Command {
    /// Whether the command works from the spec alone.
    fn needs_server(&self) -> bool {
        !matches!(self, Command::Keys | Command::Acl { .. } | Command::Lock { .. })
    }
}

/// What a command printed and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// 0 done and clean, 1 differences found or a check failed.
    pub code: u8,
    /// The text (a table, or one JSON document with `--json`).
    pub output: String,
}

/// The admin tool of keyspace `K` as a program: arguments from the command
/// line, settings from the environment, output on stdout, errors on stderr.
/// A binary's whole `main` (see [the module docs](self)).
pub async fn main<K: EachDocument>() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let name = std::env::args().next().unwrap_or_else(|| "admin".to_owned());
    match program::<K>(cli).await {
        Ok(ran) => {
            print!("{}", ran.output);
            ExitCode::from(ran.code)
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::from(2)
        }
    }
}

async fn program<K: EachDocument>(cli: Cli) -> std::result::Result<Ran, Box<dyn std::error::Error>> {
    let config = crate::MicroDcsConfig::from_env()?;
    if !cli.command.needs_server() {
        let prefix = config.valkey.prefix()?;
        return Ok(offline::<K>(&cli.command, cli.json, &prefix)?);
    }
    let valkey = Valkey::connect(&config.valkey).await?;
    if let Command::Mcp = cli.command {
        let inspector = crate::inspect::Inspector::new(&crate::KeyspaceHandle::<K>::new(valkey));
        inspector.serve_mcp(tokio::io::BufReader::new(tokio::io::stdin()), tokio::io::stdout()).await?;
        return Ok(Ran { code: 0, output: String::new() });
    }
    Ok(online::<K>(&valkey, cli.command, cli.json).await?)
}

/// Runs one admin command of keyspace `K` on `valkey` with these
/// arguments (without the program name), as the program would, and
/// returns its output: for tests and for tools that embed it. `mcp` is
/// the program's only (it serves stdin and stdout).
///
/// # Errors
/// Arguments that do not parse ([`Error::InvalidArgument`] with clap's
/// message), and the errors of the command (connection, permissions).
pub async fn run<K: EachDocument>(
    valkey: &Valkey,
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> Result<Ran> {
    let cli = parse(args)?;
    if let Command::Mcp = cli.command {
        return Err(Error::InvalidArgument("`mcp` serves stdin and stdout: run it from `admin::main`".into()));
    }
    if !cli.command.needs_server() {
        return offline::<K>(&cli.command, cli.json, valkey.prefix());
    }
    online::<K>(valkey, cli.command, cli.json).await
}

/// [`run`] for the commands that need no server (`keys`, `acl`, `lock`),
/// with the key prefix the ACL rules are for.
///
/// # Errors
/// Arguments that do not parse, or a command that needs a server
/// ([`Error::InvalidArgument`]).
pub fn run_offline<K: EachDocument>(
    prefix: &crate::KeyPrefix,
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> Result<Ran> {
    let cli = parse(args)?;
    offline::<K>(&cli.command, cli.json, prefix)
}

/// Whether these arguments name a command that needs no server.
///
/// # Errors
/// Arguments that do not parse ([`Error::InvalidArgument`]).
pub fn is_offline(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Result<bool> {
    Ok(!parse(args)?.command.needs_server())
}

fn parse(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Result<Cli> {
    let argv = std::iter::once(OsString::from("admin")).chain(args.into_iter().map(Into::into));
    Cli::try_parse_from(argv).map_err(|e| Error::InvalidArgument(e.to_string()))
}

/// The commands that need no server.
fn offline<K: EachDocument>(command: &Command, json: bool, prefix: &crate::KeyPrefix) -> Result<Ran> {
    let ok = |output: String| Ok(Ran { code: 0, output });
    match command {
        Command::Keys => ok(crate::inspect::keyspace_markdown(&K::SPEC)),
        Command::Acl { role, user } => {
            let role = crate::acl::AclRole::from_name(role)
                .ok_or_else(|| Error::InvalidArgument(format!("no role `{role}` (app, inspector, maintenance)")))?;
            ok(format!("{}\n", role.setuser(prefix, user)))
        }
        Command::Lock { what } => {
            use crate::lock::{Bless, LockError, LockStatus, check_spec};
            let (path, bless) = match what {
                LockCmd::Check { path } => (path, Bless::No),
                LockCmd::Write { path, force } => (path, if *force { Bless::Force } else { Bless::Safe }),
            };
            let (code, status, text) = match check_spec(&K::SPEC, path, bless) {
                Ok(LockStatus::Current) => (0, "current", format!("{} matches the code\n", path.display())),
                Ok(LockStatus::Written(diff)) => {
                    (0, "written", format!("{} written\n{}", path.display(), diff.report()))
                }
                Err(LockError::Io { source, .. }) => {
                    return Err(Error::InvalidArgument(format!("{}: {source}", path.display())));
                }
                Err(e) => (1, "outdated", format!("{e}\n")),
            };
            let output =
                if json { render::json(&json!({ "lock": path, "status": status, "report": text })) } else { text };
            Ok(Ran { code, output })
        }
        _ => Err(Error::InvalidArgument("this command needs a server".into())),
    }
}

/// The commands that talk to the server.
async fn online<K: EachDocument>(valkey: &Valkey, command: Command, json: bool) -> Result<Ran> {
    let kinds = Kinds::<K>::open(valkey);
    match command {
        Command::Verify(a) => maintain(&kinds, &a, false, json).await,
        Command::Rebuild(a) => maintain(&kinds, &a, true, json).await,
        Command::Inspect { what } => render::inspect::<K>(valkey, what, json).await,
        Command::Migrate { step } => migrate(valkey, &kinds, step, json).await,
        Command::Mcp | Command::Keys | Command::Acl { .. } | Command::Lock { .. } => {
            offline::<K>(&command, json, valkey.prefix())
        }
    }
}

/// `verify` or `rebuild` over the kinds the arguments select.
async fn maintain<K: EachDocument>(kinds: &Kinds<K>, args: &MaintArgs, fix: bool, json: bool) -> Result<Ran> {
    let selected = kinds.select(args.kind.as_deref())?;
    let progress = render::progress(json);
    let mut reports = Vec::new();
    for k in selected {
        if let Some(i) = &args.index
            && !k.index_names().contains(&i.as_str())
        {
            continue;
        }
        let opts = MaintenanceOptions {
            scope: args.scope.as_deref(),
            index: args.index.as_deref(),
            batch: args.batch,
            progress: Some(&progress),
            ..MaintenanceOptions::default()
        };
        let report = if fix { k.rebuild(&opts).await? } else { k.verify(&opts).await? };
        reports.push((k.spec().kind, report));
    }
    let mut ran = render::reports(&reports, fix, json);
    if !json && !kinds.skipped.is_empty() {
        ran.output += &format!("not opened (no serde impls for the JSON codec): {}\n", kinds.skipped.join(", "));
    }
    Ok(ran)
}

/// The lease name of a keyspace's migrations.
fn lease_name<K: EachDocument>() -> String {
    format!("migrate-{}", K::SPEC.name)
}

/// How long a migration lease lives unless renewed.
const LEASE_TTL: Duration = Duration::from_secs(30);

async fn migrate<K: EachDocument>(valkey: &Valkey, kinds: &Kinds<K>, step: Migrate, json: bool) -> Result<Ran> {
    match step {
        Migrate::Plan { lock } => {
            let lock_report = match &lock {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
                    let locked = crate::lock::Lock::parse(&text)
                        .map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
                    Some(crate::lock::LockDiff::between(&locked, &crate::lock::Lock::of(&K::SPEC)))
                }
                None => None,
            };
            let flagged = kinds.flagged().await?;
            Ok(render::plan(lock_report.as_ref(), &flagged, json))
        }
        Migrate::Status => {
            let flagged = kinds.flagged().await?;
            let building = kinds.building().await?;
            let writers = kinds.writers().await?;
            let lease = crate::inspect::Inspector::new(&crate::KeyspaceHandle::<K>::new(valkey.clone()))
                .lease(&lease_name::<K>())
                .await?;
            let running = lease.holder.is_some();
            Ok(render::status(
                &render::Status { flagged: &flagged, building: &building, writers: &writers },
                running,
                lease.ttl_ms,
                json,
            ))
        }
        Migrate::Verify => maintain(kinds, &MaintArgs { batch: 500, ..MaintArgs::default() }, false, json).await,
        Migrate::Apply { batch } => under_lease::<K, _>(valkey, apply::apply::<K>(kinds, batch, json)).await,
        Migrate::Drop { lock } => {
            under_lease::<K, _>(valkey, drop::drop_indexes::<K>(valkey, kinds, &lock, json)).await
        }
        Migrate::Finish => {
            under_lease::<K, _>(valkey, async {
                let mut reports = Vec::new();
                for k in kinds.all() {
                    reports.push((k.spec().kind, k.accept(&MaintenanceOptions::default()).await?));
                }
                let left = kinds.flagged().await?;
                Ok(render::finished(&reports, &left, json))
            })
            .await
        }
    }
}

/// Runs `work` while holding the keyspace's migration lease, renewed at a
/// third of its lifetime; refused while another operator holds it, stopped
/// when the lease is lost.
async fn under_lease<K: EachDocument, F: Future<Output = Result<Ran>>>(valkey: &Valkey, work: F) -> Result<Ran> {
    let leases = LeaseStore::new(valkey.clone());
    let name = lease_name::<K>();
    let owner = format!("admin-{}", crate::store::new_op_id());
    let lease = match leases.acquire(&name, &owner, LEASE_TTL, &crate::store::new_op_id()).await? {
        Acquire::Acquired(l) => l,
        Acquire::Held { remaining, .. } => {
            return Err(Error::InvalidArgument(format!(
                "another operator runs a migration of `{}` (lease `{name}`, {} ms left): wait for it, then run again",
                K::SPEC.name,
                remaining.as_millis()
            )));
        }
    };
    let renew = async {
        loop {
            tokio::time::sleep(LEASE_TTL / 3).await;
            leases.renew(&lease, LEASE_TTL, &crate::store::new_op_id()).await?;
        }
        #[allow(unreachable_code)] // The loop's type: it ends only by `?`.
        Ok::<Ran, Error>(Ran { code: 0, output: String::new() })
    };
    let outcome = tokio::select! {
        r = work => r,
        e = renew => e,
    };
    // A release that fails leaves the lease to end with its lifetime.
    let _ = leases.release(&lease, &crate::store::new_op_id()).await;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_parse_as_documented() {
        let parse = |a: &[&str]| Cli::try_parse_from(std::iter::once("admin").chain(a.iter().copied()));
        assert!(matches!(
            parse(&["migrate", "apply", "--json"]).unwrap(),
            Cli { json: true, command: Command::Migrate { step: Migrate::Apply { batch: 500 } } }
        ));
        assert!(matches!(
            parse(&["--json", "verify", "--kind", "order"]).unwrap().command,
            Command::Verify(MaintArgs { kind: Some(_), .. })
        ));
        assert!(matches!(
            parse(&["lock", "write", "--force"]).unwrap().command,
            Command::Lock { what: LockCmd::Write { force: true, .. } }
        ));
        assert!(parse(&["migrate", "abort"]).is_err(), "no abort: nothing to roll back");
        assert!(matches!(
            parse(&["migrate", "drop", "--lock", "old.lock"]).unwrap().command,
            Command::Migrate { step: Migrate::Drop { lock } } if lock.to_str() == Some("old.lock")
        ));
        assert!(parse(&["migrate", "drop"]).is_err(), "the lock names what was dropped: required");
        assert!(!parse(&["keys"]).unwrap().command.needs_server());
    }
}
