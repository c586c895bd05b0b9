//! The typed document store: one generated script per write, one command per read.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use redis::{Script, Value};

use microdcs_schema::lua::{self, DeleteLayout, PutLayout, ret};
use microdcs_schema::{Document, GroupQuery, IndexEntry, KeyTemplate, Source, UniqueQuery};

mod maintenance;

pub use maintenance::{DiffKind, Difference, MaintenanceOptions, Report, fingerprint_family, fingerprints};

use crate::client::Valkey;
use crate::codec::{Codec, Json};
use crate::error::{Error, Result, is_unknown_outcome, short};

/// What the writer expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The document must not exist yet.
    Create,
    /// The stored version must be this one.
    Version(u64),
    /// Overwrite whatever is stored (still within the document's scope).
    Any,
}

/// The outcome of a put. Errors (wrong scope, unique violation, corrupt
/// hash) are [`Error`]s; these are the expected outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum PutOutcome {
    /// Written; the document now has this version.
    Written {
        /// The new version (1 after a create).
        version: u64,
    },
    /// The expected version did not match; nothing was written.
    Conflict {
        /// The stored version.
        current: u64,
    },
    /// `Expect::Version` of a document that does not exist.
    NotFound,
}

/// The outcome of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum DeleteOutcome {
    /// Deleted; this was its last version.
    Deleted {
        /// The version the document had.
        version: u64,
    },
    /// The expected version did not match; nothing was deleted.
    Conflict {
        /// The stored version.
        current: u64,
    },
    /// No such document.
    NotFound,
}

/// A page request: start at `cursor` (0 for the first page), about `count` ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Rank offset for sorted lists, `SSCAN` cursor for sets; 0 to start.
    pub cursor: u64,
    /// Page size (for sets a hint to `SSCAN COUNT`).
    pub count: usize,
}

impl Page {
    /// The first page of `count` ids.
    pub fn first(count: usize) -> Self {
        Page { cursor: 0, count }
    }
}

/// A page of ids and the request for the next one (`None` at the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdPage {
    /// Ids in this page.
    pub ids: Vec<String>,
    /// The next page, if there is one.
    pub next: Option<Page>,
}

/// What was read of a stored document: enough to update or delete it in one
/// round trip (its version and the index fields the next write must remove).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct ReadState {
    exists: bool,
    version: u64,
    scope: Option<String>,
    /// Aligned with `Plan::fields`.
    fields: Vec<Option<String>>,
    ops: String,
}

/// A document as read from the store.
#[derive(Clone, PartialEq)]
pub struct Stored<D> {
    /// The document.
    pub doc: D,
    /// Its version.
    pub version: u64,
    /// Its id.
    pub id: String,
    /// Its scope.
    pub scope: String,
    state: ReadState,
}

impl<D: fmt::Debug> fmt::Debug for Stored<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stored")
            .field("id", &self.id)
            .field("scope", &self.scope)
            .field("version", &self.version)
            .field("doc", &self.doc)
            .finish_non_exhaustive()
    }
}

/// Where an index placeholder's value comes from at run time.
#[derive(Debug, Clone, Copy)]
enum Ph {
    Id,
    Scope,
    Field(usize),
}

#[derive(Debug)]
struct IndexPlan {
    template: KeyTemplate,
    placeholders: Vec<Ph>,
    /// Positions in `Plan::fields` of this index's fields, in layout order.
    fields: Vec<usize>,
}

/// Everything derived from `D::SPEC` once per store.
struct Plan {
    put: Script,
    delete: Script,
    find: Script,
    put_layout: PutLayout,
    delete_layout: DeleteLayout,
    doc: KeyTemplate,
    list: Option<KeyTemplate>,
    sorted_list: bool,
    changes: KeyTemplate,
    registry_key: String,
    channel: String,
    fields: Vec<String>,
    unique: Vec<IndexPlan>,
    groups: Vec<IndexPlan>,
}

fn parse(t: &str) -> KeyTemplate {
    // Checked at compile time by the derive.
    KeyTemplate::parse(t).unwrap_or_else(|e| panic!("template `{t}` passed the derive but not the parser: {e:?}"))
}

impl Plan {
    fn new<D: Document>(valkey: &Valkey) -> Self {
        let spec = &D::SPEC;
        let prefix = valkey.prefix();
        let fields = lua::all_index_fields(spec);
        let index_plan = |ix: &microdcs_schema::IndexSpec<'_>| {
            let template = parse(ix.key);
            let placeholders = template
                .placeholders()
                .map(|p| match ix.binding(p).map(|b| b.source) {
                    Some(Source::Id) => Ph::Id,
                    Some(Source::Scope) => Ph::Scope,
                    _ => Ph::Field(fields.iter().position(|f| f == p).expect("index field listed")),
                })
                .collect();
            let own = lua::index_fields(ix);
            let fields = own.iter().map(|f| fields.iter().position(|g| g == f).expect("listed")).collect();
            IndexPlan { template, placeholders, fields }
        };
        let kind_channel = parse(spec.nudge);
        Plan {
            put: Script::new(D::PUT_SCRIPT),
            delete: Script::new(D::DELETE_SCRIPT),
            find: Script::new(D::FIND_SCRIPT),
            put_layout: PutLayout::new(spec),
            delete_layout: DeleteLayout::new(spec),
            doc: parse(spec.key),
            list: spec.list.map(|l| parse(l.key)),
            sorted_list: spec.list.is_some_and(|l| l.score.is_some()),
            changes: parse(spec.changes),
            registry_key: parse(spec.registry).render(prefix, &[]).expect("no placeholders"),
            channel: kind_channel.render(prefix, &[spec.kind]).expect("kind is a valid value"),
            unique: spec.unique.iter().map(index_plan).collect(),
            groups: spec.groups.iter().map(index_plan).collect(),
            fields,
        }
    }

    fn has_indexes(&self) -> bool {
        !self.unique.is_empty() || !self.groups.is_empty()
    }

    /// The old key of an index from a read state, or `None` if not indexed.
    fn old_key(&self, ix: &IndexPlan, valkey: &Valkey, id: &str, st: &ReadState) -> Result<Option<String>> {
        if !st.exists {
            return Ok(None);
        }
        let scope = st.scope.as_deref().unwrap_or_default();
        let mut values: Vec<&str> = Vec::with_capacity(ix.placeholders.len());
        for ph in &ix.placeholders {
            match ph {
                Ph::Id => values.push(id),
                Ph::Scope => values.push(scope),
                Ph::Field(i) => match st.fields.get(*i).and_then(Option::as_deref) {
                    Some(v) => values.push(v),
                    None => return Ok(None),
                },
            }
        }
        match ix.template.render(valkey.prefix(), &values) {
            Ok(k) => Ok(Some(k)),
            // We never store a value that cannot be a key segment.
            Err(e) => Err(Error::Corrupt {
                key: self.doc.render(valkey.prefix(), &[id]).unwrap_or_else(|_| id.to_owned()),
                reason: format!("stored index field cannot form its key: {e}"),
            }),
        }
    }
}

/// One script argument.
enum Arg<'a> {
    Static(&'static str),
    Owned(String),
    Borrowed(&'a str),
}

impl Arg<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Arg::Static(s) => s.as_bytes(),
            Arg::Owned(s) => s.as_bytes(),
            Arg::Borrowed(s) => s.as_bytes(),
        }
    }
}

fn flag(b: bool) -> Arg<'static> {
    Arg::Static(if b { "1" } else { "0" })
}

/// A new operation id: 32 hex digits, unique per process and time.
pub fn new_op_id() -> String {
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(seed ^ n);
    h.write_u64(t);
    format!("{:016x}{:016x}", seed ^ t.rotate_left(17), h.finish() ^ n)
}

/// The typed store of document type `D`, made by [`Valkey::store`].
///
/// Every single-document operation is one round trip in the steady state:
/// `get` is one `HGETALL`, `create`/`update`/`delete` one `EVALSHA` of the
/// generated script, `find` one `EVALSHA` of the lookup script. Only `put`
/// with `Expect::Any` or `Expect::Version` (without a prior read) of a type
/// with indexes reads the index fields first.
pub struct Store<D, C = Json> {
    valkey: Valkey,
    plan: Arc<Plan>,
    codec: Arc<C>,
    _doc: PhantomData<fn() -> D>,
}

impl<D, C> Clone for Store<D, C> {
    fn clone(&self) -> Self {
        Store { valkey: self.valkey.clone(), plan: self.plan.clone(), codec: self.codec.clone(), _doc: PhantomData }
    }
}

impl<D, C> fmt::Debug for Store<D, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("type", &std::any::type_name::<D>()).finish_non_exhaustive()
    }
}

/// How many times a write re-reads after the script saw index fields change.
const MAX_REREADS: u32 = 8;

impl<D: Document, C: Codec<D>> Store<D, C> {
    pub(crate) fn new(valkey: Valkey, codec: C) -> Self {
        let plan = Arc::new(Plan::new::<D>(&valkey));
        Store { valkey, plan, codec: Arc::new(codec), _doc: PhantomData }
    }

    /// The document key of `id`.
    ///
    /// # Errors
    /// An empty or over-long id.
    pub fn key(&self, id: &str) -> Result<String> {
        self.plan.doc.render(self.valkey.prefix(), &[id]).map_err(render_err)
    }

    /// Reads a document (one `HGETALL`).
    ///
    /// # Errors
    /// Invalid id, connection errors, a corrupt hash, a key of the wrong type,
    /// or a document text the codec rejects.
    pub async fn get(&self, id: &str) -> Result<Option<Stored<D>>> {
        self.read(|| self.get_once(id)).await
    }

    /// Runs a read; after a lost connection runs it once more (a read is
    /// safe to repeat, and the connection manager reconnects in between).
    async fn read<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        match f().await {
            Err(e) if e.is_connection_error() => {
                tracing::debug!(error = %e, "read lost its connection; reading again");
                tokio::time::sleep(self.valkey.write_options().retry_delay).await;
                f().await
            }
            other => other,
        }
    }

    async fn get_once(&self, id: &str) -> Result<Option<Stored<D>>> {
        let key = self.key(id)?;
        let mut con = self.valkey.connection();
        let map: HashMap<String, Vec<u8>> =
            redis::cmd("HGETALL").arg(&key).query_async(&mut con).await.map_err(|e| Error::from_redis(e, &key))?;
        if map.is_empty() {
            return Ok(None);
        }
        self.decode_hash(&key, id, map).map(Some)
    }

    fn decode_hash(&self, key: &str, id: &str, mut map: HashMap<String, Vec<u8>>) -> Result<Stored<D>> {
        let corrupt = |reason: &str| Error::Corrupt { key: key.to_owned(), reason: reason.to_owned() };
        let text = |map: &mut HashMap<String, Vec<u8>>, f: &str| -> Result<Option<String>> {
            match map.remove(f) {
                None => Ok(None),
                Some(b) => String::from_utf8(b).map(Some).map_err(|_| corrupt(&format!("field `{f}` is not UTF-8"))),
            }
        };
        let version = parse_version(text(&mut map, "v")?.as_deref())
            .ok_or_else(|| corrupt("`v` is missing or not a positive integer"))?;
        let scope = text(&mut map, "scope")?.ok_or_else(|| corrupt("`scope` is missing"))?;
        let doc_text = text(&mut map, "doc")?.ok_or_else(|| corrupt("`doc` is missing"))?;
        let ops = text(&mut map, "ops")?.unwrap_or_default();
        let mut fields = Vec::with_capacity(self.plan.fields.len());
        for f in &self.plan.fields {
            fields.push(text(&mut map, f)?);
        }
        let doc = self.codec.decode(&doc_text).map_err(Error::codec)?;
        Ok(Stored {
            doc,
            version,
            id: id.to_owned(),
            scope: scope.clone(),
            state: ReadState { exists: true, version, scope: Some(scope), fields, ops },
        })
    }

    /// Reads what a write needs: version, scope, op history and index fields (one `HMGET`).
    async fn read_state(&self, key: &str) -> Result<ReadState> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(key).arg("v").arg("scope").arg("ops");
        for f in &self.plan.fields {
            cmd.arg(f);
        }
        let mut con = self.valkey.connection();
        let vals: Vec<Option<String>> = cmd.query_async(&mut con).await.map_err(|e| Error::from_redis(e, key))?;
        let mut it = vals.into_iter();
        let v = it.next().flatten();
        let scope = it.next().flatten();
        let ops = it.next().flatten().unwrap_or_default();
        let fields: Vec<Option<String>> = it.collect();
        if v.is_none() && scope.is_none() {
            return Ok(ReadState { fields: vec![None; self.plan.fields.len()], ..ReadState::default() });
        }
        let version = parse_version(v.as_deref()).ok_or_else(|| Error::Corrupt {
            key: key.to_owned(),
            reason: "`v` is missing or not a positive integer".into(),
        })?;
        Ok(ReadState { exists: true, version, scope, fields, ops })
    }

    /// Creates a document that must not exist yet (one round trip).
    ///
    /// # Errors
    /// See [`Store::put`].
    pub async fn create(&self, doc: &D) -> Result<PutOutcome> {
        self.put_inner(doc, Expect::Create, None, None, None).await
    }

    /// Updates a document you read, expecting its version unchanged (one
    /// round trip: the read tells which index entries to replace).
    ///
    /// # Errors
    /// See [`Store::put`].
    pub async fn update(&self, read: &Stored<D>, doc: &D) -> Result<PutOutcome> {
        self.put_inner(doc, Expect::Version(read.version), Some(read.state.clone()), Some(read.id.as_str()), None).await
    }

    /// Updates a document you read and, when written, moves `read` to the
    /// new version and document, so a loop of updates needs no re-read (one
    /// round trip each).
    ///
    /// # Errors
    /// See [`Store::put`]; on an error or a conflict `read` is unchanged.
    pub async fn update_in_place(&self, read: &mut Stored<D>, doc: D) -> Result<PutOutcome> {
        let out = self
            .put_inner(&doc, Expect::Version(read.version), Some(read.state.clone()), Some(read.id.as_str()), None)
            .await?;
        if let PutOutcome::Written { version } = out {
            let entries = doc.index_entries(self.valkey.prefix())?;
            let mut fields = vec![None; self.plan.fields.len()];
            for e in entries.unique.iter().chain(&entries.groups).flatten() {
                for (name, value) in &e.fields {
                    if let Some(i) = self.plan.fields.iter().position(|f| f == name) {
                        fields[i] = Some(value.clone());
                    }
                }
            }
            read.state =
                ReadState { exists: true, version, scope: Some(entries.scope.clone()), fields, ops: String::new() };
            read.version = version;
            read.doc = doc;
        }
        Ok(out)
    }

    /// Like [`Store::update`] with your own operation id, so a retry in a
    /// later call is recognised as the same write.
    ///
    /// # Errors
    /// See [`Store::put`]; [`Error::InvalidOpId`] for a malformed id.
    pub async fn update_with_op(&self, read: &Stored<D>, doc: &D, op: &str) -> Result<PutOutcome> {
        self.put_inner(doc, Expect::Version(read.version), Some(read.state.clone()), Some(read.id.as_str()), Some(op))
            .await
    }

    /// Writes a document with any expectation. `Expect::Create` is one round
    /// trip; `Expect::Version` and `Expect::Any` read the index fields first
    /// when the type has indexes (prefer [`Store::update`] after a read).
    ///
    /// # Errors
    /// [`Error::WrongScope`] and [`Error::UniqueViolation`] (nothing written),
    /// [`Error::Corrupt`] or [`Error::WrongType`] for a damaged hash,
    /// [`Error::Codec`], [`Error::Index`] for an invalid id or index value,
    /// [`Error::UnknownOutcome`] when every attempt lost the connection.
    pub async fn put(&self, doc: &D, expect: Expect) -> Result<PutOutcome> {
        self.put_inner(doc, expect, None, None, None).await
    }

    /// Like [`Store::put`] with your own operation id.
    ///
    /// # Errors
    /// See [`Store::put`]; [`Error::InvalidOpId`] for a malformed id.
    pub async fn put_with_op(&self, doc: &D, expect: Expect, op: &str) -> Result<PutOutcome> {
        self.put_inner(doc, expect, None, None, Some(op)).await
    }

    async fn put_inner(
        &self,
        doc: &D,
        expect: Expect,
        read: Option<ReadState>,
        read_id: Option<&str>,
        op: Option<&str>,
    ) -> Result<PutOutcome> {
        let op = match op {
            Some(op) if !lua::valid_op_id(op) => return Err(Error::InvalidOpId(op.to_owned())),
            Some(op) => op.to_owned(),
            None => new_op_id(),
        };
        let plan = &*self.plan;
        let entries = doc.index_entries(self.valkey.prefix())?;
        if let Some(read_id) = read_id.filter(|r| *r != entries.id) {
            return Err(Error::ReadMismatch { read: read_id.to_owned(), doc: entries.id.clone() });
        }
        let text = self.codec.encode(doc).map_err(Error::codec)?;
        let key = entries.key.as_str();
        // The state the script will check the stored index fields against.
        let mut state = match (read, expect) {
            (Some(s), _) => Some(s),
            (None, Expect::Create) => Some(ReadState { fields: vec![None; plan.fields.len()], ..ReadState::default() }),
            (None, _) if !plan.has_indexes() => None,
            (None, _) => Some(self.read_state(key).await?),
        };
        if let (Some(s), Expect::Version(n)) = (&state, expect)
            && s.exists
            && s.version != n
        {
            // Our own earlier write (same op id, unknown outcome) counts as done.
            if let Some(v) = applied_version(&s.ops, &op) {
                self.valkey.metrics().add_already_applied();
                return Ok(PutOutcome::Written { version: v });
            }
            return Ok(PutOutcome::Conflict { current: s.version });
        }
        let l = &plan.put_layout;
        let prefix = self.valkey.prefix();
        for _ in 0..MAX_REREADS {
            let mut keys = vec![String::new(); l.num_keys];
            keys[l.common.doc_key - 1] = key.to_owned();
            keys[l.common.changes_key - 1] = plan.changes.render(prefix, &[&entries.scope]).map_err(render_err)?;
            keys[l.common.registry_key - 1] = plan.registry_key.clone();
            if let (Some(k), Some(list)) = (l.common.list_key, &entries.list) {
                keys[k - 1] = list.key.clone();
            }
            let mut args: Vec<Arg<'_>> = (0..l.num_args).map(|_| Arg::Static("")).collect();
            args[l.common.expect - 1] = match expect {
                Expect::Create => Arg::Static("create"),
                Expect::Any => Arg::Static("any"),
                Expect::Version(n) => Arg::Owned(n.to_string()),
            };
            args[l.common.op - 1] = Arg::Borrowed(&op);
            args[l.common.id - 1] = Arg::Borrowed(&entries.id);
            args[l.common.scope - 1] = Arg::Borrowed(&entries.scope);
            args[l.doc - 1] = Arg::Borrowed(&text);
            args[l.common.kind - 1] = Arg::Static(D::SPEC.kind);
            args[l.common.channel - 1] = Arg::Borrowed(&plan.channel);
            args[l.common.maxlen - 1] = Arg::Owned(self.valkey.write_options().change_stream_max_len.to_string());
            if let (Some(s), Some(list)) = (l.score, &entries.list) {
                args[s - 1] = Arg::Owned(list.score.map_or_else(String::new, |x| x.to_string()));
            }
            let new_entries = entries.unique.iter().chain(&entries.groups);
            let index_plans = plan.unique.iter().chain(&plan.groups);
            for ((slots, ix), new) in l.indexes.iter().zip(index_plans).zip(new_entries) {
                fill_new(&mut keys, &mut args, slots, new.as_ref(), key);
                let old_key = match &state {
                    Some(s) => plan.old_key(ix, &self.valkey, &entries.id, s)?,
                    None => None,
                };
                keys[slots.index.old.key - 1] = old_key.clone().unwrap_or_else(|| key.to_owned());
                args[slots.index.old.flag - 1] = flag(old_key.is_some());
                for (i, fpos) in ix.fields.iter().enumerate() {
                    let v = state
                        .as_ref()
                        .and_then(|s| s.fields.get(*fpos).cloned().flatten())
                        .filter(|_| old_key.is_some());
                    args[slots.index.old.value(i) - 1] = v.map_or(Arg::Static(""), Arg::Owned);
                }
            }
            let reply = self.run(&plan.put, &keys, &args, key).await?;
            let (code, rest) = split_reply("put", &reply.value)?;
            match code {
                ret::WRITTEN => return Ok(PutOutcome::Written { version: int_at("put", rest, 0)? }),
                ret::ALREADY_APPLIED => {
                    self.valkey.metrics().add_already_applied();
                    return Ok(PutOutcome::Written { version: int_at("put", rest, 0)? });
                }
                ret::CONFLICT => return Ok(PutOutcome::Conflict { current: int_at("put", rest, 0)? }),
                ret::NOT_FOUND => return Ok(PutOutcome::NotFound),
                ret::WRONG_SCOPE => {
                    return Err(Error::WrongScope {
                        id: entries.id.clone(),
                        stored: str_at("put", rest, 0)?,
                        given: entries.scope.clone(),
                    });
                }
                ret::UNIQUE_VIOLATION => {
                    let n = usize::try_from(int_at("put", rest, 0)?).unwrap_or(0);
                    let idx = n.saturating_sub(1);
                    let slots = l.indexes.get(idx);
                    return Err(Error::UniqueViolation {
                        type_name: D::SPEC.type_name,
                        index: slots.map(|s| s.index.name.clone()).unwrap_or_default(),
                        key: slots.map(|s| keys[s.new.key - 1].clone()).unwrap_or_default(),
                        holder: str_at("put", rest, 1)?,
                    });
                }
                ret::CORRUPT => return Err(corrupt_reply(key, rest)),
                ret::RETRY => {
                    state = Some(self.read_state(key).await?);
                }
                _ => return Err(Error::Protocol { script: "put", reply: short(&reply.value) }),
            }
        }
        Err(Error::Contention { key: key.to_owned(), attempts: MAX_REREADS })
    }

    /// Deletes a document you read, expecting its version unchanged (one round trip).
    ///
    /// # Errors
    /// See [`Store::delete_id`].
    pub async fn delete(&self, read: &Stored<D>) -> Result<DeleteOutcome> {
        self.delete_inner(&read.id, Expect::Version(read.version), Some(read.state.clone())).await
    }

    /// Deletes by id (`Expect::Any` or `Expect::Version`); reads the document's
    /// scope and index fields first.
    ///
    /// # Errors
    /// Invalid id, [`Error::Corrupt`], [`Error::WrongType`], connection errors.
    pub async fn delete_id(&self, id: &str, expect: Expect) -> Result<DeleteOutcome> {
        self.delete_inner(id, expect, None).await
    }

    async fn delete_inner(&self, id: &str, expect: Expect, read: Option<ReadState>) -> Result<DeleteOutcome> {
        let plan = &*self.plan;
        let key = self.key(id)?;
        let op = new_op_id();
        let mut state = match read {
            Some(s) => s,
            None => self.read_state(&key).await?,
        };
        let l = &plan.delete_layout;
        let prefix = self.valkey.prefix();
        let mut unknown_before = false;
        for _ in 0..MAX_REREADS {
            if !state.exists {
                return Ok(DeleteOutcome::NotFound);
            }
            let scope = state.scope.clone().unwrap_or_default();
            let mut keys = vec![String::new(); l.num_keys];
            keys[l.common.doc_key - 1] = key.clone();
            keys[l.common.changes_key - 1] = plan.changes.render(prefix, &[&scope]).map_err(render_err)?;
            keys[l.common.registry_key - 1] = plan.registry_key.clone();
            if let (Some(k), Some(t)) = (l.common.list_key, &plan.list) {
                keys[k - 1] = t.render(prefix, &[&scope]).map_err(render_err)?;
            }
            let mut args: Vec<Arg<'_>> = (0..l.num_args).map(|_| Arg::Static("")).collect();
            // Always the version read: a retry after a lost reply then never
            // deletes a document re-created in between (unless it reached the
            // same version); `Expect::Any` re-reads on a conflict instead.
            if let Expect::Version(n) = expect
                && n != state.version
            {
                return Ok(DeleteOutcome::Conflict { current: state.version });
            }
            args[l.common.expect - 1] = Arg::Owned(state.version.to_string());
            args[l.common.op - 1] = Arg::Borrowed(&op);
            args[l.common.id - 1] = Arg::Borrowed(id);
            args[l.common.scope - 1] = Arg::Owned(scope.clone());
            args[l.common.kind - 1] = Arg::Static(D::SPEC.kind);
            args[l.common.channel - 1] = Arg::Borrowed(&plan.channel);
            args[l.common.maxlen - 1] = Arg::Owned(self.valkey.write_options().change_stream_max_len.to_string());
            for (slots, ix) in l.indexes.iter().zip(plan.unique.iter().chain(&plan.groups)) {
                let old_key = plan.old_key(ix, &self.valkey, id, &state)?;
                keys[slots.old.key - 1] = old_key.clone().unwrap_or_else(|| key.clone());
                args[slots.old.flag - 1] = flag(old_key.is_some());
                for (i, fpos) in ix.fields.iter().enumerate() {
                    let v = state.fields.get(*fpos).cloned().flatten().filter(|_| old_key.is_some());
                    args[slots.old.value(i) - 1] = v.map_or(Arg::Static(""), Arg::Owned);
                }
            }
            let reply = self.run(&plan.delete, &keys, &args, &key).await?;
            unknown_before |= reply.after_unknown;
            let (code, rest) = split_reply("delete", &reply.value)?;
            match code {
                ret::WRITTEN => return Ok(DeleteOutcome::Deleted { version: int_at("delete", rest, 0)? }),
                ret::CONFLICT if expect == Expect::Any => state = self.read_state(&key).await?,
                ret::CONFLICT => return Ok(DeleteOutcome::Conflict { current: int_at("delete", rest, 0)? }),
                ret::NOT_FOUND if unknown_before => {
                    // The attempt whose reply was lost deleted it.
                    self.valkey.metrics().add_already_applied();
                    return Ok(DeleteOutcome::Deleted { version: state.version });
                }
                ret::NOT_FOUND => return Ok(DeleteOutcome::NotFound),
                ret::WRONG_SCOPE => {
                    return Err(Error::WrongScope {
                        id: id.to_owned(),
                        stored: str_at("delete", rest, 0)?,
                        given: scope,
                    });
                }
                ret::CORRUPT => return Err(corrupt_reply(&key, rest)),
                ret::RETRY => state = self.read_state(&key).await?,
                _ => return Err(Error::Protocol { script: "delete", reply: short(&reply.value) }),
            }
        }
        Err(Error::Contention { key, attempts: MAX_REREADS })
    }

    /// Runs a write script; after a lost connection or timeout waits
    /// `retry_delay` and runs it again with the same operation id (the script
    /// recognises an applied op id), up to `attempts` in all.
    async fn run(&self, script: &Script, keys: &[String], args: &[Arg<'_>], key: &str) -> Result<Reply> {
        let opts = self.valkey.write_options();
        let mut con = self.valkey.connection();
        let mut attempt = 1;
        loop {
            let mut inv = script.prepare_invoke();
            for k in keys {
                inv.key(k.as_str());
            }
            for a in args {
                inv.arg(a.bytes());
            }
            match inv.invoke_async::<Value>(&mut con).await {
                Ok(value) => return Ok(Reply { value, after_unknown: attempt > 1 }),
                Err(e) if is_unknown_outcome(&e) => {
                    if attempt >= opts.attempts {
                        return Err(Error::UnknownOutcome { key: key.to_owned(), attempts: attempt, source: e });
                    }
                    tracing::warn!(key, attempt, error = %e, "write outcome unknown; checking and retrying");
                    self.valkey.metrics().add_write_retry();
                    attempt += 1;
                    tokio::time::sleep(opts.retry_delay).await;
                }
                Err(e) => return Err(Error::from_redis(e, key)),
            }
        }
    }

    /// Finds the document through a unique index (one round trip).
    ///
    /// # Errors
    /// Invalid values, connection errors, a corrupt document.
    pub async fn find(&self, query: UniqueQuery<D>) -> Result<Option<Stored<D>>> {
        self.read(|| self.find_once(&query)).await
    }

    async fn find_once(&self, query: &UniqueQuery<D>) -> Result<Option<Stored<D>>> {
        let ix = self.plan.unique.get(query.index).ok_or_else(|| Error::Protocol {
            script: "find",
            reply: format!("no unique index {} on {}", query.index, D::SPEC.type_name),
        })?;
        let values: Vec<&str> = query.values.iter().map(String::as_str).collect();
        let ukey = ix.template.render(self.valkey.prefix(), &values).map_err(render_err)?;
        let mut con = self.valkey.connection();
        let reply: Option<Vec<Option<Vec<u8>>>> = self
            .plan
            .find
            .key(&ukey)
            .arg(self.valkey.prefix().as_str())
            .invoke_async(&mut con)
            .await
            .map_err(|e| Error::from_redis(e, &ukey))?;
        let Some(row) = reply else { return Ok(None) };
        let mut it = row.into_iter();
        let id = it.next().flatten().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        let mut map = HashMap::new();
        for (name, v) in
            ["v", "scope", "doc"].into_iter().map(str::to_owned).chain(self.plan.fields.iter().cloned()).zip(it)
        {
            if let Some(v) = v {
                map.insert(name, v);
            }
        }
        if map.is_empty() {
            tracing::warn!(index_key = %ukey, id, "unique index points at a missing document");
            return Ok(None);
        }
        let key = self.key(&id)?;
        let stored = self.decode_hash(&key, &id, map)?;
        // The entry must describe the document it points at (else it is stale).
        let matches = ix.placeholders.iter().zip(&query.values).all(|(ph, want)| match ph {
            Ph::Id => stored.id == *want,
            Ph::Scope => stored.scope == *want,
            Ph::Field(i) => stored.state.fields.get(*i).and_then(Option::as_deref) == Some(want.as_str()),
        });
        if !matches {
            tracing::warn!(index_key = %ukey, id, "unique index entry is stale: the document has other values");
            return Ok(None);
        }
        Ok(Some(stored))
    }

    /// A page of ids from a group index (`SSCAN`; the page size is a hint, an
    /// id may appear twice if the set is resized between pages).
    ///
    /// # Errors
    /// Invalid values, connection errors, a key of the wrong type.
    pub async fn ids(&self, query: GroupQuery<D>, page: Page) -> Result<IdPage> {
        let ix = self.plan.groups.get(query.index).ok_or_else(|| Error::Protocol {
            script: "ids",
            reply: format!("no group index {} on {}", query.index, D::SPEC.type_name),
        })?;
        let values: Vec<&str> = query.values.iter().map(String::as_str).collect();
        let key = ix.template.render(self.valkey.prefix(), &values).map_err(render_err)?;
        self.read(|| self.sscan(&key, page)).await
    }

    /// A page of the per-scope list: by rank for a sorted-set list (ascending
    /// score), by `SSCAN` for a plain set.
    ///
    /// # Errors
    /// The type has no list, invalid scope, connection errors.
    pub async fn list(&self, scope: &str, page: Page) -> Result<IdPage> {
        let t = self
            .plan
            .list
            .as_ref()
            .ok_or_else(|| Error::Protocol { script: "list", reply: format!("{} has no list", D::SPEC.type_name) })?;
        let key = t.render(self.valkey.prefix(), &[scope]).map_err(render_err)?;
        if !self.plan.sorted_list {
            return self.read(|| self.sscan(&key, page)).await;
        }
        self.read(|| self.zrange(&key, page)).await
    }

    async fn zrange(&self, key: &str, page: Page) -> Result<IdPage> {
        let count = page.count.max(1) as u64;
        let stop = page.cursor + count - 1;
        let mut con = self.valkey.connection();
        let ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(key)
            .arg(page.cursor)
            .arg(stop)
            .query_async(&mut con)
            .await
            .map_err(|e| Error::from_redis(e, key))?;
        let next = (ids.len() as u64 == count).then_some(Page { cursor: stop + 1, count: page.count });
        Ok(IdPage { ids, next })
    }

    async fn sscan(&self, key: &str, page: Page) -> Result<IdPage> {
        let mut con = self.valkey.connection();
        let (cursor, ids): (u64, Vec<String>) = redis::cmd("SSCAN")
            .arg(key)
            .arg(page.cursor)
            .arg("COUNT")
            .arg(page.count.max(1))
            .query_async(&mut con)
            .await
            .map_err(|e| Error::from_redis(e, key))?;
        Ok(IdPage { ids, next: (cursor != 0).then_some(Page { cursor, count: page.count }) })
    }
}

struct Reply {
    value: Value,
    after_unknown: bool,
}

fn fill_new(
    keys: &mut [String],
    args: &mut [Arg<'_>],
    slots: &lua::PutIndexSlots,
    new: Option<&IndexEntry>,
    doc_key: &str,
) {
    keys[slots.new.key - 1] = new.map_or_else(|| doc_key.to_owned(), |e| e.key.clone());
    args[slots.new.flag - 1] = flag(new.is_some());
    for (i, f) in slots.index.fields.iter().enumerate() {
        let v = new.and_then(|e| e.fields.iter().find(|(n, _)| *n == f.name)).map(|(_, v)| v.clone());
        args[slots.new.value(i) - 1] = v.map_or(Arg::Static(""), Arg::Owned);
    }
}

pub(crate) fn render_err(e: microdcs_schema::RenderError) -> Error {
    match e {
        microdcs_schema::RenderError::Value(k) => Error::Key(k),
        other => Error::Protocol { script: "render", reply: other.to_string() },
    }
}

fn parse_version(v: Option<&str>) -> Option<u64> {
    v?.parse::<u64>().ok().filter(|v| *v >= 1)
}

/// The version an op id produced, from an `ops` history (` op=v op=v ...`).
fn applied_version(ops: &str, op: &str) -> Option<u64> {
    ops.split(' ').find_map(|e| e.strip_prefix(op)?.strip_prefix('=')?.parse().ok())
}

fn split_reply<'a>(script: &'static str, v: &'a Value) -> Result<(i64, &'a [Value])> {
    if let Value::Array(items) = v
        && let Some(Value::Int(code)) = items.first()
    {
        return Ok((*code, &items[1..]));
    }
    Err(Error::Protocol { script, reply: short(v) })
}

fn int_at(script: &'static str, rest: &[Value], i: usize) -> Result<u64> {
    match rest.get(i) {
        Some(Value::Int(n)) if *n >= 0 => Ok(*n as u64),
        other => Err(Error::Protocol { script, reply: short(&other) }),
    }
}

fn str_at(script: &'static str, rest: &[Value], i: usize) -> Result<String> {
    match rest.get(i) {
        Some(Value::BulkString(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
        Some(Value::SimpleString(s)) => Ok(s.clone()),
        other => Err(Error::Protocol { script, reply: short(&other) }),
    }
}

fn corrupt_reply(key: &str, rest: &[Value]) -> Error {
    let field = str_at("put", rest, 0).unwrap_or_default();
    let reason = match field.as_str() {
        "v" => "`v` is not a positive integer".to_owned(),
        f => format!("`{f}` is missing"),
    };
    Error::Corrupt { key: key.to_owned(), reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_history_lookup() {
        let ops = " a1=3 b2=4 a=5";
        assert_eq!(applied_version(ops, "a1"), Some(3));
        assert_eq!(applied_version(ops, "a"), Some(5));
        assert_eq!(applied_version(ops, "b"), None);
    }

    #[test]
    fn op_ids_are_valid_and_unique() {
        let a = new_op_id();
        let b = new_op_id();
        assert_ne!(a, b);
        assert!(lua::valid_op_id(&a), "{a}");
        assert_eq!(a.len(), 32);
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version(Some("3")), Some(3));
        assert_eq!(parse_version(Some("0")), None);
        assert_eq!(parse_version(Some("x")), None);
        assert_eq!(parse_version(None), None);
    }
}
