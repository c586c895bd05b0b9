//! The inspector: read-only views of a keyspace through its spec, for
//! developer tools and operators. Kinds and families, scopes, ids, one
//! document with the state of each of its index entries, dedupe claims,
//! leases, streams and values (a heartbeat).
//!
//! An [`Inspector<K>`](Inspector) is made from a keyspace handle
//! ([`Inspector::new`]). What it knows without the server comes from the
//! keyspace's spec: [`Inspector::kinds`] ([`KindInfo`]) and
//! [`Inspector::families`] ([`FamilyInfo`]); [`keyspace_markdown`] renders
//! the same spec as a key table. What it reads from the server comes back
//! as serializable views: [`Inspector::scopes`], [`Inspector::ids`] and
//! [`Inspector::index_ids`] ([`InspectorPage`], walked by cursor),
//! [`Inspector::document`] ([`DocumentView`]: the hash as stored, decoded,
//! with an [`EntryView`] per index entry its fields call for and what was
//! found there, an [`EntryState`]), [`Inspector::dedupe`]
//! ([`DedupeView`]), [`Inspector::lease`] ([`LeaseView`]),
//! [`Inspector::changes`] and [`Inspector::stream`] ([`StreamView`] with a
//! [`GroupView`] per consumer group) and [`Inspector::value`]
//! ([`ValueView`]). With the `mcp` feature, `Inspector::serve_mcp` offers
//! the same views as Model Context Protocol tools over any line-based
//! reader and writer (stdio): the stateless revision 2026-07-28
//! (`MCP_PROTOCOL_VERSION`) and the handshake revisions 2024-11-05 to
//! 2025-11-25.
//!
//! ```no_run
//! use microdcs_valkey::inspect::{EntryState, Inspector};
//! use microdcs_valkey::{Document, KeyspaceHandle, keyspace};
//!
//! #[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
//! #[microdcs(unique(key = "job:byorder:{order}", order = order))]
//! struct Job { id: String, scope: String, order: String }
//!
//! keyspace! { Jobs { documents: [Job] } }
//!
//! # async fn demo(jobs: KeyspaceHandle<Jobs>) -> Result<(), Box<dyn std::error::Error>> {
//! let inspector = Inspector::new(&jobs);
//! for scope in inspector.scopes("job").await? {
//!     let page = inspector.ids("job", &scope, 0, 100).await?;
//!     println!("{scope}: {:?}", page.ids);
//! }
//! if let Some(view) = inspector.document("job", "j-1").await? {
//!     let broken = view.entries.iter().filter(|e| !matches!(e.state, EntryState::Present | EntryState::NotIndexed));
//!     println!("{} v{:?}: {} damaged entries", view.key, view.version, broken.count());
//! }
//! // With `mcp`: the tools on any line-based pair (stdin and stdout for an IDE).
//! # #[cfg(feature = "mcp")] {
//! # let (input, output) = (tokio::io::empty(), tokio::io::sink());
//! inspector.serve_mcp(input, output).await?;
//! # }
//! # Ok(()) }
//! ```
//!
//! # Guarantees and bounds
//!
//! It sends only the reads of
//! [`AclRole::Inspector`](crate::acl::AclRole::Inspector), so it works as a
//! user with read-only key access, and offers no way to send any other
//! command: pointing it at production changes nothing there. Each view is
//! a few reads, each bounded like any read (`ResponseTimeout`, one quick
//! retry); lists are bounded ([`Inspector::MAX_SCOPES`], a page per call,
//! [`Inspector::MAX_GROUP_DETAILS`] groups detailed per stream). What it
//! cannot read as expected it shows (an [`EntryState::Unreadable`], a
//! stored text that is not JSON) rather than failing the whole view; an
//! unknown kind or family is [`Error::InvalidArgument`]. A document's
//! views show the stored document, so give the inspector's user only to
//! those who may read the data.
//!
//! The key table, the MCP tools and the ACL roles are in the guide:
//! [Maintenance](https://github.com/microdcs/microdcs/blob/main/docs/guide/10-maintenance.md).

use std::marker::PhantomData;

use microdcs_schema::{DocumentSpec, KeyTemplate, KeyType, Keyspace, Role, builtin};
use redis::{Cmd, FromRedisValue, Value};

use crate::client::Valkey;
use crate::error::{Error, Result};
use crate::handle::KeyspaceHandle;
use crate::retry;
use crate::store::{render_err, render_list};

// The views as Model Context Protocol tools.
mod document;
#[cfg(feature = "mcp")]
mod mcp;
mod views;

#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub use mcp::PROTOCOL_VERSION as MCP_PROTOCOL_VERSION;

pub use microdcs_schema::keyspace_markdown;

pub use views::{
    DedupeView, DocumentView, EntryState, EntryView, FamilyInfo, GroupView, InspectorPage, KindInfo, LeaseView,
    StreamView, ValueView,
};

/// Read-only views of keyspace `K` through its spec, for developer tools:
/// kinds and families, scopes, ids, one document with the state of each of
/// its index entries, dedupe claims, leases, streams and values. It sends
/// only the reads of [`AclRole::Inspector`](crate::acl::AclRole::Inspector), so
/// it works as a user with read-only key access.
pub struct Inspector<K> {
    valkey: Valkey,
    _keyspace: PhantomData<fn() -> K>,
}

impl<K> Clone for Inspector<K> {
    fn clone(&self) -> Self {
        Inspector { valkey: self.valkey.clone(), _keyspace: PhantomData }
    }
}

impl<K> std::fmt::Debug for Inspector<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector").field("valkey", &self.valkey).finish()
    }
}

impl<K: Keyspace> Inspector<K> {
    /// The most scopes [`Inspector::scopes`] lists; a type with more is an
    /// error that points to the paged walk.
    pub const MAX_SCOPES: usize = 10_000;

    /// The consumer groups of a stream whose oldest pending entry a stream
    /// view asks for (one round trip each); later groups show none.
    pub const MAX_GROUP_DETAILS: usize = 100;

    /// The inspector of a keyspace on its connection.
    pub fn new(handle: &KeyspaceHandle<K>) -> Self {
        Inspector { valkey: handle.valkey().clone(), _keyspace: PhantomData }
    }

    /// The document types and their families.
    pub fn kinds(&self) -> Vec<KindInfo> {
        K::SPEC
            .documents
            .iter()
            .map(|d| KindInfo {
                kind: d.kind.to_owned(),
                type_name: d.type_name.to_owned(),
                key: d.key.to_owned(),
                families: d.families().map(family_info).collect(),
                ttl_ms: d.ttl_ms,
            })
            .collect()
    }

    /// Every family of the keyspace: the document types', the declared
    /// ones and the shared ones it holds without declaring them.
    pub fn families(&self) -> Vec<FamilyInfo> {
        K::SPEC.all_families().map(family_info).collect()
    }

    fn doc_spec(&self, kind: &str) -> Result<&'static DocumentSpec<'static>> {
        K::SPEC.documents.iter().find(|d| d.kind == kind).ok_or_else(|| {
            let kinds: Vec<&str> = K::SPEC.documents.iter().map(|d| d.kind).collect();
            Error::InvalidArgument(format!(
                "no kind `{kind}` in keyspace `{}` (kinds: {})",
                K::SPEC.name,
                kinds.join(", ")
            ))
        })
    }

    async fn read<T: FromRedisValue>(&self, cmd: Cmd, key: &str) -> Result<T> {
        retry::read_cmd(&self.valkey, &cmd, key).await
    }

    async fn exists(&self, key: &str) -> Result<bool> {
        // `PTTL` answers -2 for a missing key, and is among the inspector's reads.
        let ms: i64 = self.read(redis::cmd("PTTL").arg(key).clone(), key).await?;
        Ok(ms != -2)
    }

    async fn ttl(&self, key: &str) -> Result<Option<u64>> {
        let ms: i64 = self.read(redis::cmd("PTTL").arg(key).clone(), key).await?;
        Ok(u64::try_from(ms).ok())
    }

    /// The server's clock in Unix milliseconds.
    async fn now_ms(&self) -> Result<i64> {
        Ok(i64::try_from(retry::server_time_ms(&self.valkey).await?).unwrap_or(i64::MAX))
    }

    /// The scopes holding documents of `kind`, from its scope registry
    /// (`SSCAN` to the end), sorted.
    ///
    /// The registry is shared by every type that writes to it, so it names
    /// scopes, not kinds: for an unscoped kind the answer is its one scope
    /// `_` (when it has documents), and for a scoped kind the `_` that
    /// unscoped types of the same registry put there is left out. Other
    /// scopes may hold documents of other kinds only.
    ///
    /// # Errors
    /// An unknown kind, connection errors, a key of another type; more
    /// than [`Inspector::MAX_SCOPES`] scopes ([`Error::InvalidArgument`]).
    pub async fn scopes(&self, kind: &str) -> Result<Vec<String>> {
        let spec = self.doc_spec(kind)?;
        let key = parse(spec.registry)?.render(self.valkey.prefix(), &[]).map_err(render_err)?;
        let (mut out, mut cursor) = (Vec::new(), 0u64);
        loop {
            let (next, batch): (u64, Vec<String>) =
                self.read(redis::cmd("SSCAN").arg(&key).arg(cursor).arg("COUNT").arg(500).clone(), &key).await?;
            out.extend(batch);
            if next == 0 {
                break;
            }
            // A view, not a walk: past this many, the paged walk is the tool.
            if out.len() > Self::MAX_SCOPES {
                return Err(Error::InvalidArgument(format!(
                    "`{kind}` has more than {} scopes: walk them a page at a time with `Store::scopes`",
                    Self::MAX_SCOPES
                )));
            }
            cursor = next;
        }
        out.sort();
        out.dedup();
        let unscoped = microdcs_schema::UNSCOPED;
        if spec.unscoped {
            out.retain(|s| s == unscoped);
        } else if K::SPEC.documents.iter().any(|d| d.unscoped && d.registry == spec.registry) {
            out.retain(|s| s != unscoped);
        }
        Ok(out)
    }

    /// A page of ids of `kind` in `scope`, through its list: by rank for a
    /// sorted list (`cursor` is the rank to start at), by `SSCAN` for a
    /// plain set (`cursor` is the scan cursor). Start with 0.
    ///
    /// # Errors
    /// An unknown kind, a kind without a list, connection errors.
    pub async fn ids(&self, kind: &str, scope: &str, cursor: u64, count: usize) -> Result<InspectorPage> {
        let spec = self.doc_spec(kind)?;
        let list =
            spec.list.ok_or_else(|| Error::InvalidArgument(format!("kind `{kind}` has no list to read ids from")))?;
        let key = render_list(&parse(list.key)?, self.valkey.prefix(), scope).map_err(render_err)?;
        let count = count.clamp(1, crate::Page::MAX);
        if list.score.is_some() {
            return self.rank_page(&key, cursor, count).await;
        }
        let (next, ids): (u64, Vec<String>) =
            self.read(redis::cmd("SSCAN").arg(&key).arg(cursor).arg("COUNT").arg(count).clone(), &key).await?;
        Ok(InspectorPage { ids, next: (next != 0).then_some(next) })
    }

    /// A page of ids through an index of `kind`: a group index's members
    /// (`cursor` is the `SSCAN` cursor, start with 0), or the one id a
    /// unique index holds. `values` fill the index template's placeholders
    /// in order (the scope among them where the template has one).
    ///
    /// # Errors
    /// An unknown kind or index, wrong values, connection errors.
    pub async fn index_ids(
        &self,
        kind: &str,
        index: &str,
        values: &[&str],
        cursor: u64,
        count: usize,
    ) -> Result<InspectorPage> {
        let spec = self.doc_spec(kind)?;
        let (ix, unique) =
            match (spec.unique.iter().find(|i| i.name == index), spec.groups.iter().find(|i| i.name == index)) {
                (Some(i), _) => (i, true),
                (None, Some(i)) => (i, false),
                (None, None) => {
                    let names: Vec<&str> = spec.unique.iter().chain(spec.groups).map(|i| i.name).collect();
                    return Err(Error::InvalidArgument(format!(
                        "kind `{kind}` has no index `{index}` (indexes: {})",
                        names.join(", ")
                    )));
                }
            };
        let key = parse(ix.key)?.render(self.valkey.prefix(), values).map_err(render_err)?;
        if unique {
            let id: Option<String> = self.read(redis::cmd("GET").arg(&key).clone(), &key).await?;
            return Ok(InspectorPage { ids: id.into_iter().collect(), next: None });
        }
        let count = count.clamp(1, crate::Page::MAX);
        if ix.kind().is_sorted() {
            return self.rank_page(&key, cursor, count).await;
        }
        let (next, ids): (u64, Vec<String>) =
            self.read(redis::cmd("SSCAN").arg(&key).arg(cursor).arg("COUNT").arg(count).clone(), &key).await?;
        Ok(InspectorPage { ids, next: (next != 0).then_some(next) })
    }

    /// A page of a sorted set by rank: `count` ids from rank `cursor`.
    async fn rank_page(&self, key: &str, cursor: u64, count: usize) -> Result<InspectorPage> {
        let stop = cursor.saturating_add(count as u64 - 1);
        let ids: Vec<String> = self.read(redis::cmd("ZRANGE").arg(key).arg(cursor).arg(stop).clone(), key).await?;
        let next = (ids.len() == count).then_some(stop + 1);
        Ok(InspectorPage { ids, next })
    }

    /// The dedupe claim of event `(source, id)` (the runtime's own dedupe
    /// family).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn dedupe(&self, source: &str, id: &str) -> Result<DedupeView> {
        let key = parse(builtin::DEDUPE.key)?
            .render(self.valkey.prefix(), &[&crate::dedupe::dedupe_hash(source, id)])
            .map_err(render_err)?;
        let value: Option<String> = self.read(redis::cmd("GET").arg(&key).clone(), &key).await?;
        let ttl_ms = self.ttl(&key).await?;
        Ok(DedupeView { key, value, ttl_ms })
    }

    /// The fencing lease `name` (the runtime's own lease families).
    ///
    /// # Errors
    /// An invalid name, connection errors, a key of another type.
    pub async fn lease(&self, name: &str) -> Result<LeaseView> {
        let prefix = self.valkey.prefix();
        let record = parse(builtin::LEASE.key)?.render(prefix, &[name]).map_err(render_err)?;
        let fence_key = parse(builtin::LEASE_FENCE.key)?.render(prefix, &[name]).map_err(render_err)?;
        let rec: std::collections::HashMap<String, String> =
            self.read(redis::cmd("HGETALL").arg(&record).clone(), &record).await?;
        let fence: Option<String> = self.read(redis::cmd("GET").arg(&fence_key).clone(), &fence_key).await?;
        let ttl_ms = self.ttl(&record).await?;
        Ok(LeaseView {
            name: name.to_owned(),
            holder: rec.get("owner").cloned(),
            lease_id: rec.get("id").cloned(),
            token: rec.get("token").cloned(),
            fence,
            ttl_ms,
        })
    }

    /// The change stream of `kind` in `scope`.
    ///
    /// # Errors
    /// An unknown kind, connection errors, a key of another type.
    pub async fn changes(&self, kind: &str, scope: &str) -> Result<StreamView> {
        let spec = self.doc_spec(kind)?;
        let template = spec
            .changes
            .ok_or_else(|| Error::InvalidArgument(format!("kind `{kind}` has no change stream (`changes = none`)")))?;
        let key = parse(template)?.render(self.valkey.prefix(), &[scope]).map_err(render_err)?;
        self.stream_at(key).await
    }

    /// A stream of a declared family, by the family's name and its
    /// placeholder values (in template order).
    ///
    /// # Errors
    /// No such stream family, wrong values, connection errors.
    pub async fn stream(&self, family: &str, values: &[&str]) -> Result<StreamView> {
        let key = self.declared_key(family, KeyType::Stream, values)?;
        self.stream_at(key).await
    }

    async fn stream_at(&self, key: String) -> Result<StreamView> {
        let length: u64 = self.read(redis::cmd("XLEN").arg(&key).clone(), &key).await?;
        // A stream that does not exist (length 0, and XINFO would fail on
        // it) has no groups; any other failure is reported.
        let groups: Vec<Value> = if length == 0 && !self.exists(&key).await? {
            Vec::new()
        } else {
            self.read(redis::cmd("XINFO").arg("GROUPS").arg(&key).clone(), &key).await?
        };
        let now = self.now_ms().await?;
        let mut out = Vec::new();
        for (n, g) in groups.into_iter().enumerate() {
            let info = crate::streams::GroupInfo::from_reply(g);
            let name = info.name;
            // The oldest pending entry costs a round trip per group: asked
            // for the first groups only, so a stream with thousands of
            // groups is still one bounded view.
            let summary: Vec<Value> = if n < Self::MAX_GROUP_DETAILS {
                self.read(redis::cmd("XPENDING").arg(&key).arg(&name).clone(), &key).await?
            } else {
                Vec::new()
            };
            let oldest = summary.get(1).and_then(text);
            let oldest_pending_age_ms = oldest
                .as_deref()
                .and_then(|id| id.split('-').next()?.parse::<i64>().ok())
                .map(|ms| u64::try_from(now - ms).unwrap_or(0));
            out.push(GroupView {
                consumers: info.consumers,
                pending: info.pending,
                lag: info.lag,
                oldest_pending_age_ms,
                name,
            });
        }
        Ok(StreamView { key, length, groups: out })
    }

    /// A value of a declared string family (a heartbeat), with its
    /// lifetime and, when it is a Unix time in milliseconds, its age by the
    /// server's clock.
    ///
    /// # Errors
    /// No such string family, wrong values, connection errors.
    pub async fn value(&self, family: &str, values: &[&str]) -> Result<ValueView> {
        let key = self.declared_key(family, KeyType::String, values)?;
        let value: Option<String> = self.read(redis::cmd("GET").arg(&key).clone(), &key).await?;
        let ttl_ms = self.ttl(&key).await?;
        let age_ms = match value.as_deref().and_then(|v| v.trim().parse::<i64>().ok()) {
            // Plausible Unix milliseconds (after 2001), not a small count.
            Some(ms) if ms > 1_000_000_000_000 => Some(self.now_ms().await? - ms),
            _ => None,
        };
        Ok(ValueView { key, value, ttl_ms, age_ms })
    }

    fn declared_key(&self, family: &str, key_type: KeyType, values: &[&str]) -> Result<String> {
        let f = K::SPEC.declared(family).filter(|f| f.key_type == key_type).ok_or_else(|| {
            let names: Vec<&str> = K::SPEC.families.iter().filter(|f| f.key_type == key_type).map(|f| f.name).collect();
            Error::InvalidArgument(format!(
                "keyspace `{}` declares no {} family `{family}` ({}: {})",
                K::SPEC.name,
                key_type.type_name(),
                key_type.type_name(),
                names.join(", ")
            ))
        })?;
        parse(f.key)?.render(self.valkey.prefix(), values).map_err(render_err)
    }
}

fn family_info(f: microdcs_schema::Family<'_>) -> FamilyInfo {
    let role = match f.role {
        Role::Document => "document",
        Role::List => "list",
        Role::Unique(_) => "unique",
        Role::Group(_) => "group",
        Role::Declared(_) => "declared",
    };
    FamilyInfo {
        role: role.to_owned(),
        name: f.name.to_owned(),
        key_type: f.key_type.type_name().to_owned(),
        template: f.key.to_owned(),
    }
}

fn parse(t: &str) -> Result<KeyTemplate> {
    KeyTemplate::parse(t).map_err(|_| Error::InvalidArgument(format!("template `{t}` does not parse")))
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}
