//! Live schema evolution: which releases of a type are writing, and whether
//! each index is complete.
//!
//! - **Stamps** (in the generated scripts): every write of a type at
//!   `#[microdcs(schema = N)]`, N > 1, stamps the document hash (`sv`), and a
//!   write of an older release to a stamped document is refused
//!   ([`Error::SchemaBehind`]), nothing written.
//! - **Writers announce their schema** ([`Store::announce`]): every store
//!   that writes renews an entry `<schema>:<writer id>` in the kind's
//!   registry of live writers (`schema:writers:{#kind}`) before a write when
//!   its last renewal is `WriterHeartbeat` old; an entry lapses
//!   `WriterLifetime` after its renewal. [`Store::writers`] says which
//!   schemas are live and whether an older one remains.
//! - **Index states** (`schema:indexes:{#kind}`): the announcement records
//!   each index of the writer's schema. Release 1 records its indexes ready;
//!   a later release records an index it adds or changes (by its layout
//!   fingerprint) as building. A query through a building index is refused
//!   ([`Error::IndexBuilding`]) by a store of a schema above 1, never
//!   answered from a partial index. [`Store::backfill`] completes it online
//!   and records it ready. An older release that starts writing again
//!   records the ready indexes it does not keep as building again (its
//!   writes would miss them); a reader sees that within one
//!   `WriterHeartbeat`.
//!
//! Why refuse an older write rather than merge in the script: the script
//! would have to parse the stored text and keep what the older release does
//! not know. Lua's `cjson` re-encodes numbers as doubles (an integer past
//! 2^53, a decimal of more than 14 digits comes back rounded), and a
//! `CompactJson` text holds values by position, of which the older release
//! knows only its own arity. A refusal keeps every stored byte, and tells the
//! older release exactly what happened.

// Just over 600 lines: stamps, the writer registry and the index states and
// backfill are one protocol (a backfill reads the registry and the states it
// writes). The seam if it grows: the backfill loop into its own file.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use microdcs_schema::Document;
use sha2::{Digest, Sha256};

use super::Store;
use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::retry::LuaScript;

mod backfill;

pub use backfill::{BackfillOptions, BackfillReport};

static ANNOUNCE: std::sync::LazyLock<LuaScript> =
    std::sync::LazyLock::new(|| LuaScript::new(include_str!("evolution/announce.lua")));
static WRITERS: std::sync::LazyLock<LuaScript> =
    std::sync::LazyLock::new(|| LuaScript::read_only(include_str!("evolution/writers.lua")));

/// The first 16 hex digits of SHA-256 over an index's layout text: the
/// fingerprint of [`microdcs_schema::IndexLayout`], the same digest the
/// fingerprints hash of `rebuild` records.
pub(crate) fn layout_digest(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// What a store of one process knows of its own announcements.
#[derive(Debug)]
pub(super) struct Writer {
    /// This store's id in the registry (random, per store plan).
    id: String,
    /// When this store last renewed its entry.
    last: Mutex<Option<Instant>>,
    /// The indexes this store last saw ready, and when it looked. Trusted
    /// for one `WriterHeartbeat`: an index goes back to building when an
    /// older release starts writing (its writes do not keep it), and a
    /// reader learns it at its next look.
    ready: Mutex<Option<ReadySeen>>,
}

/// The indexes a store saw ready at one look.
#[derive(Debug)]
struct ReadySeen {
    at: Instant,
    names: std::collections::HashSet<String>,
}

impl Writer {
    pub(super) fn new() -> Self {
        Writer { id: crate::op_id::new_op_id(), last: Mutex::default(), ready: Mutex::default() }
    }
}

/// The live writers of a kind, by schema ([`Store::writers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveWriters {
    /// The schema of the store that asked.
    pub ours: u32,
    /// How many live writers announced each schema.
    pub schemas: BTreeMap<u32, usize>,
    /// Entries that are not `<schema>:<id>` (damage): counted, never read
    /// as a schema.
    pub damaged: usize,
}

impl LiveWriters {
    /// Whether a writer of a schema older than ours is live: while one is,
    /// a building index cannot become ready (that writer does not maintain
    /// it).
    pub fn older_remain(&self) -> bool {
        self.schemas.keys().any(|s| *s < self.ours)
    }

    /// The newest live schema, if any writer is live.
    pub fn newest(&self) -> Option<u32> {
        self.schemas.keys().next_back().copied()
    }
}

/// The state of one index ([`Store::index_states`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexState {
    /// Complete: kept by every live writer, and by a backfill for the
    /// documents written before.
    Ready,
    /// Added or changed by a release and not yet backfilled: a query
    /// through it is refused.
    Building,
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// `(index, fingerprint)` per unique and group index of `D`.
    fn index_fingerprints() -> Vec<(&'static str, String)> {
        let names: Vec<&str> = D::SPEC.unique.iter().chain(D::SPEC.groups).map(|ix| ix.name).collect();
        D::SPEC
            .index_layouts()
            .into_iter()
            .skip(usize::from(D::SPEC.list.is_some()))
            .filter(|l| names.contains(&l.index))
            .map(|l| (l.index, layout_digest(&l.text)))
            .collect()
    }

    fn writers_key(&self) -> Result<String> {
        builtin_key(microdcs_schema::builtin::WRITERS, self.valkey.prefix(), D::SPEC.kind)
    }

    fn index_states_key(&self) -> Result<String> {
        builtin_key(microdcs_schema::builtin::INDEX_STATES, self.valkey.prefix(), D::SPEC.kind)
    }

    /// Announces this store as a live writer of its kind at its schema
    /// (`<schema>:<writer id>` in `schema:writers:{#kind}`, lasting
    /// `WriterLifetime`), and records the states of its indexes (release 1
    /// records its indexes ready; a later release records an index it adds
    /// or changes as building, see [`Store::index_states`]). Every write does this first when the last
    /// announcement is `WriterHeartbeat` old, so a store need not call it;
    /// call it at start to be counted before the first write.
    ///
    /// Safe to repeat; ends within `WriteAttempts x (ResponseTimeout +
    /// WriteRetryDelay)`.
    ///
    /// # Errors
    /// Connection errors; a key of another type is [`Error::WrongType`].
    pub async fn announce(&self) -> Result<()> {
        let writers = self.writers_key()?;
        self.announce_or(|f| match f {
            crate::retry::Failure::Unknown { source, .. } | crate::retry::Failure::Failed(source) => {
                Error::from_redis(source, &writers)
            }
        })
        .await
    }

    /// [`Store::announce`], its failure made an error by `fail`.
    async fn announce_or(&self, fail: impl FnOnce(crate::retry::Failure) -> Error) -> Result<()> {
        let writers = self.writers_key()?;
        let states = self.index_states_key()?;
        // A member of the registry, not a key; its format is the schema's
        // (pinned in the tests).
        let member = microdcs_schema::builtin::writer_member(D::SPEC.schema, &self.plan.writer.id);
        let life = self.valkey.write_options().writer_lifetime.as_millis().to_string();
        let schema = D::SPEC.schema.to_string();
        let fps = Self::index_fingerprints();
        let mut call = ANNOUNCE
            .call()
            .key(&writers)
            .key(&states)
            .arg(member.as_bytes())
            .arg(life.as_bytes())
            .arg(schema.as_bytes());
        for (name, fp) in &fps {
            call = call.arg(name.as_bytes()).arg(fp.as_bytes());
        }
        let call = &call;
        let started = Instant::now();
        // Renewing an entry and recording the same states again changes
        // nothing more, so the write rule applies.
        crate::retry::repeatable(&self.valkey, "writer announcement", &writers, |mut con| async move {
            call.run(&mut con).await
        })
        .await
        .map_err(fail)?;
        if let Ok(mut last) = self.plan.writer.last.lock() {
            *last = Some(started);
        }
        Ok(())
    }

    /// [`Store::announce`] when the last announcement of this store is
    /// `WriterHeartbeat` old (or there was none): before every write, so a
    /// writer is in the registry whenever it writes.
    pub(super) async fn announce_if_due(&self) -> Result<()> {
        if self.heartbeat_due() { self.announce().await } else { Ok(()) }
    }

    /// Whether this store's last announcement is `WriterHeartbeat` old (or
    /// there was none).
    fn heartbeat_due(&self) -> bool {
        let period = self.valkey.write_options().writer_heartbeat;
        self.plan.writer.last.lock().map_or(true, |l| l.is_none_or(|t| t.elapsed() >= period))
    }

    /// The announcement before a write of `key`, when due (see
    /// [`Store::announce`]). Its failure is the write's, named by the
    /// document: connections lost at every attempt are the write's unknown
    /// outcome (it was not sent, which a read or a repeat with the same op
    /// id resolves), a refusal for too few replicas the write's refusal.
    pub(super) async fn announce_before_write(&self, key: &str) -> Result<()> {
        if !self.heartbeat_due() {
            return Ok(());
        }
        let writers = self.writers_key()?;
        self.announce_or(|f| match f {
            crate::retry::Failure::Unknown { source, attempts } => {
                Error::UnknownOutcome { key: key.to_owned(), attempts, source }
            }
            crate::retry::Failure::Failed(e) => match Error::from_redis(e, &writers) {
                Error::NoReplicas { source, .. } => Error::NoReplicas { key: key.to_owned(), source },
                other => other,
            },
        })
        .await
    }

    /// The live writers of this kind, by schema, as the registry holds
    /// them now (entries not renewed within `WriterLifetime` are gone).
    ///
    /// A read: ends within `ResponseTimeout`, plus one `WriteRetryDelay`
    /// and a quick second read after a dropped connection.
    ///
    /// # Errors
    /// Connection errors; a key of another type is [`Error::WrongType`].
    pub async fn writers(&self) -> Result<LiveWriters> {
        let key = self.writers_key()?;
        let call = WRITERS.call().key(&key);
        let call = &call;
        let v = crate::retry::read(&self.valkey, |mut con| async move { call.run(&mut con).await })
            .await
            .map_err(|e| Error::from_redis(e, &key))?;
        let members: Vec<String> = crate::retry::reply(v).map_err(|e| Error::from_redis(e, &key))?;
        let mut out = LiveWriters { ours: D::SPEC.schema, schemas: BTreeMap::new(), damaged: 0 };
        for m in members {
            match m.split_once(':').and_then(|(s, _)| microdcs_schema::parse_stamp(Some(s)).ok()) {
                Some(s) => *out.schemas.entry(s).or_default() += 1,
                None => out.damaged += 1,
            }
        }
        Ok(out)
    }

    /// The state of each unique and group index of this release, as this
    /// release reads it: ready when recorded ready with this release's
    /// layout, else building (added or changed, or never recorded).
    ///
    /// # Errors
    /// Connection errors; a key of another type is [`Error::WrongType`].
    pub async fn index_states(&self) -> Result<Vec<(&'static str, IndexState)>> {
        let key = self.index_states_key()?;
        let fps = Self::index_fingerprints();
        if fps.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&key);
        for (name, _) in &fps {
            cmd.arg(*name);
        }
        let cmd = &cmd;
        let stored: Vec<Option<String>> =
            crate::retry::read(&self.valkey, |mut con| async move { cmd.query_async(&mut con).await })
                .await
                .map_err(|e| Error::from_redis(e, &key))?;
        Ok(fps
            .iter()
            .zip(stored)
            .map(|((name, fp), s)| {
                let ready = s.as_deref().and_then(|s| s.strip_prefix("ready:")).and_then(|r| r.split_once(':'));
                let state = if ready.is_some_and(|(_, f)| f == fp) { IndexState::Ready } else { IndexState::Building };
                (*name, state)
            })
            .collect())
    }

    /// [`Store::ensure_index_ready`] for group index number `n`.
    pub(super) async fn ensure_group_ready(&self, n: usize) -> Result<()> {
        match D::SPEC.groups.get(n) {
            Some(ix) => self.ensure_index_ready(ix.name).await,
            None => Ok(()),
        }
    }

    /// [`Store::ensure_index_ready`] for unique index number `n`.
    pub(super) async fn ensure_unique_ready(&self, n: usize) -> Result<()> {
        match D::SPEC.unique.get(n) {
            Some(ix) => self.ensure_index_ready(ix.name).await,
            None => Ok(()),
        }
    }

    /// Refuses a query through index `index` while it is building. A type
    /// at schema 1 never asks (its indexes were kept from its first
    /// write, and no older release exists to go around them); a later one
    /// reads the states, and trusts what it saw ready for one
    /// `WriterHeartbeat` (an older release that starts writing records
    /// the indexes it does not keep as building again, before its first
    /// write).
    pub(super) async fn ensure_index_ready(&self, index: &str) -> Result<()> {
        if D::SPEC.schema <= 1 {
            return Ok(());
        }
        let fresh = self.valkey.write_options().writer_heartbeat;
        if self
            .plan
            .writer
            .ready
            .lock()
            .is_ok_and(|r| r.as_ref().is_some_and(|seen| seen.at.elapsed() < fresh && seen.names.contains(index)))
        {
            return Ok(());
        }
        let at = Instant::now();
        let states = self.index_states().await?;
        let ready: Vec<&str> = states.iter().filter(|(_, s)| *s == IndexState::Ready).map(|(n, _)| *n).collect();
        if let Ok(mut r) = self.plan.writer.ready.lock() {
            *r = Some(ReadySeen { at, names: ready.iter().map(|n| (*n).to_owned()).collect() });
        }
        if ready.contains(&index) || !states.iter().any(|(n, _)| *n == index) {
            Ok(())
        } else {
            Err(Error::IndexBuilding { kind: D::SPEC.kind, index: index.to_owned() })
        }
    }
}

/// The key of built-in family `spec` (one `{#kind}` placeholder) for `kind`.
fn builtin_key(
    spec: microdcs_schema::FamilySpec<'static>,
    prefix: &microdcs_schema::KeyPrefix,
    kind: &str,
) -> Result<String> {
    let t = microdcs_schema::KeyTemplate::parse(spec.key).map_err(|_| {
        Error::InvalidArgument(format!("family `{}` has an invalid template `{}`", spec.name, spec.key))
    })?;
    t.render(prefix, &[kind]).map_err(crate::error::render_err)
}
