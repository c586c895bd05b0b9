//! Reads: `get`, `find`, `ids`, `list`, their counts, and the read of what a
//! write needs.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::observe::observed;
use crate::retry::{LuaScript, reply};

use microdcs_schema::{Document, GroupQuery, UniqueQuery};

use super::Store;
use super::call::VERSION_REASON;
use super::plan::Ph;
use super::render_err;
use super::types::{IdPage, Page, PageAt, ReadState, Stored, parse_version};
use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::page::Scored;
use crate::retry;

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Reads a document (one `HGETALL`).
    ///
    /// # Errors
    /// Invalid id, connection errors, a corrupt hash, a key of the wrong type,
    /// or a document text the codec rejects.
    pub async fn get(&self, id: &str) -> Result<Option<Stored<D>>> {
        observed("get", D::SPEC.kind, self.read(|| self.get_once(None, id))).await
    }

    /// Reads document `id` of `scope` (one `HGETALL`): for a type whose ids
    /// are unique per scope (its key holds `{scope}`), the way to read one;
    /// for other types [`Store::get`] that answers `None` for a document of
    /// another scope.
    ///
    /// # Errors
    /// As [`Store::get`].
    pub async fn get_in(&self, scope: &str, id: &str) -> Result<Option<Stored<D>>> {
        observed("get", D::SPEC.kind, self.read(|| self.get_once(Some(scope), id))).await
    }

    /// Reads many documents in one round trip (a pipeline of `HGETALL`s):
    /// one entry per id, in the order asked, `None` for an id with no
    /// document; an id asked twice is answered twice. At most
    /// [`Store::MAX_MANY`] ids; none asks nothing of the server.
    ///
    /// # Errors
    /// An invalid id or too many ids (nothing is read), connection errors,
    /// and the first corrupt hash, key of the wrong type or document text
    /// the codec rejects, named by its key: the call does not hand out the
    /// other documents beside a damaged one.
    pub async fn get_many<I: AsRef<str>>(&self, ids: &[I]) -> Result<Vec<Option<Stored<D>>>> {
        observed("get_many", D::SPEC.kind, self.get_many_inner(None, ids)).await
    }

    /// [`Store::get_many`] of documents of `scope` (the way to name them
    /// for a type whose ids are unique per scope); for other types a
    /// document of another scope is `None`.
    ///
    /// # Errors
    /// As [`Store::get_many`].
    pub async fn get_many_in<I: AsRef<str>>(&self, scope: &str, ids: &[I]) -> Result<Vec<Option<Stored<D>>>> {
        observed("get_many", D::SPEC.kind, self.get_many_inner(Some(scope), ids)).await
    }

    async fn get_many_inner<I: AsRef<str>>(&self, scope: Option<&str>, ids: &[I]) -> Result<Vec<Option<Stored<D>>>> {
        if ids.len() > Self::MAX_MANY {
            return Err(Error::InvalidArgument(format!(
                "get_many takes at most {} ids, not {}",
                Self::MAX_MANY,
                ids.len()
            )));
        }
        let prefix = self.valkey.prefix();
        let keys = ids.iter().map(|id| self.plan.doc_key(prefix, scope, id.as_ref())).collect::<Result<Vec<_>>>()?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let got = self.read(|| self.get_many_once(ids, &keys)).await?;
        // Asked in a scope: a document of another scope is not there.
        let got: Vec<_> = got.into_iter().map(|s| s.filter(|s| scope.is_none_or(|want| s.scope == want))).collect();
        // The span carries one scope: the one asked, or the one every
        // document found shares.
        let mut found = got.iter().flatten().map(|s| s.scope.as_str());
        let shared = found.next().filter(|first| found.all(|s| s == *first));
        if let Some(s) = scope.or(shared) {
            self.valkey.span_scope(s);
        }
        Ok(got)
    }

    /// The most ids one [`Store::get_many`] takes.
    pub const MAX_MANY: usize = 10_000;

    async fn get_many_once<I: AsRef<str>>(&self, ids: &[I], keys: &[String]) -> Result<Vec<Option<Stored<D>>>> {
        self.get_each_once(ids, keys).await?.into_iter().collect()
    }

    /// One pipeline of `HGETALL`s; a damaged document is its own entry's
    /// error, the connection's errors fail the call.
    pub(super) async fn get_each_once<I: AsRef<str>>(
        &self,
        ids: &[I],
        keys: &[String],
    ) -> Result<Vec<Result<Option<Stored<D>>>>> {
        let mut p = redis::pipe();
        // Each answer on its own, so a damaged key is named, not the batch.
        p.ignore_errors();
        for k in keys {
            p.cmd("HGETALL").arg(k);
        }
        let mut con = self.valkey.connection();
        let replies: Vec<redis::Value> = con.query_pipe(&p, true).await.map_err(|e| Error::from_redis(e, &keys[0]))?;
        Ok(ids
            .iter()
            .zip(keys)
            .zip(replies)
            .map(|((id, key), reply)| {
                if let redis::Value::ServerError(e) = reply {
                    return Err(Error::from_redis(e.into(), key));
                }
                let map: HashMap<String, Vec<u8>> =
                    redis::from_redis_value(reply).map_err(|e| Error::from_redis(e.into(), key))?;
                if map.is_empty() { Ok(None) } else { self.decode_hash(key, id.as_ref(), map).map(Some) }
            })
            .collect())
    }

    /// Runs a read; after a lost connection runs it once more (a read is
    /// safe to repeat, and the connection manager reconnects in between).
    ///
    /// Each run waits at most the response timeout, also for a reconnect
    /// (whose backoff alone can take seconds), and a run that timed out is
    /// not repeated: a server that did not answer in time will not answer
    /// the same question sooner. So a read ends within the response timeout,
    /// plus one retry delay and a quick reconnect after a dropped connection.
    pub(super) async fn read<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        retry::read_bounded(&self.valkey, f).await
    }

    pub(super) async fn get_once(&self, scope: Option<&str>, id: &str) -> Result<Option<Stored<D>>> {
        let key = self.plan.doc_key(self.valkey.prefix(), scope, id)?;
        // Asked in a scope: a document of another scope is not there.
        let got = self.get_at(&key, id).await?.filter(|s| scope.is_none_or(|want| s.scope == want));
        if let Some(s) = got.as_ref().map(|g| g.scope.as_str()).or(scope) {
            self.valkey.span_scope(s);
        }
        Ok(got)
    }

    /// The document `id` at `key` (one `HGETALL`), once.
    pub(super) async fn get_at(&self, key: &str, id: &str) -> Result<Option<Stored<D>>> {
        let mut con = self.valkey.connection();
        let map: HashMap<String, Vec<u8>> =
            redis::cmd("HGETALL").arg(key).query_async(&mut con).await.map_err(|e| Error::from_redis(e, key))?;
        if map.is_empty() {
            return Ok(None);
        }
        self.decode_hash(key, id, map).map(Some)
    }

    pub(super) fn decode_hash(&self, key: &str, id: &str, mut map: HashMap<String, Vec<u8>>) -> Result<Stored<D>> {
        let corrupt = |reason: &str| Error::Corrupt { key: key.to_owned(), reason: reason.to_owned() };
        let text = |map: &mut HashMap<String, Vec<u8>>, f: &str| -> Result<Option<String>> {
            match map.remove(f) {
                None => Ok(None),
                Some(b) => String::from_utf8(b).map(Some).map_err(|_| corrupt(&format!("field `{f}` is not UTF-8"))),
            }
        };
        let version = parse_version(text(&mut map, "v")?.as_deref()).ok_or_else(|| corrupt(VERSION_REASON))?;
        let scope = text(&mut map, "scope")?;
        let scope = D::SPEC.stored_scope(scope.as_deref()).ok_or_else(|| corrupt("`scope` is missing"))?.to_owned();
        let doc_text = text(&mut map, "doc")?.ok_or_else(|| corrupt("`doc` is missing"))?;
        let ops = text(&mut map, "ops")?.unwrap_or_default();
        let stamp = text(&mut map, microdcs_schema::STAMP_FIELD)?;
        let mut fields = Vec::with_capacity(self.plan.fields.len());
        for f in &self.plan.fields {
            fields.push(text(&mut map, f)?);
        }
        let doc = self
            .codec
            .decode_stored(&doc_text, id)
            .map_err(|e| Error::codec("decode", D::SPEC.kind, id)(Box::new(e)))?;
        // A whole text copied to another key, or a scope field edited apart
        // from the text, would otherwise be handed out (and written back) as
        // the document its key names. A text stored without its id takes
        // the id from its key.
        if doc.id() != id {
            return Err(corrupt(&format!("the document's id is `{}`, not the `{id}` of its key", doc.id())));
        }
        if doc.scope() != scope {
            return Err(corrupt(&format!(
                "the document's scope is `{}`, the hash's `scope` is `{scope}`",
                doc.scope()
            )));
        }
        // Ids unique per scope: the key names the scope too, and a hash whose
        // scope is another is damage (a write of it would go to another key).
        if D::SPEC.ids_per_scope()
            && self.plan.doc_key(self.valkey.prefix(), Some(&scope), id).ok().as_deref() != Some(key)
        {
            return Err(corrupt(&format!("the hash's `scope` is `{scope}`, not the scope its key names")));
        }
        Ok(Stored {
            doc,
            version,
            id: id.to_owned(),
            scope: scope.clone(),
            state: ReadState { exists: true, version, scope: Some(scope), fields, ops, stamp },
        })
    }

    /// Reads what a write needs: version, scope, op history and index fields
    /// (one `HMGET`), bounded like every read.
    pub(super) async fn read_state(&self, key: &str) -> Result<ReadState> {
        self.read(|| self.read_state_once(key)).await
    }

    async fn read_state_once(&self, key: &str) -> Result<ReadState> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(key).arg("v").arg("scope").arg("ops");
        for f in &self.plan.fields {
            cmd.arg(f);
        }
        let mut con = self.valkey.connection();
        let vals: Vec<Option<String>> = cmd.query_async(&mut con).await.map_err(|e| Error::from_redis(e, key))?;
        self.state_of(key, vals)
    }

    /// The state of `key` from its `v`, `scope`, `ops` and index fields, in
    /// that order: the one reading of a state, for the read above and for
    /// the state a script hands back when it asks for another attempt.
    pub(super) fn state_of(&self, key: &str, vals: Vec<Option<String>>) -> Result<ReadState> {
        if vals.len() != 3 + self.plan.fields.len() {
            return Err(Error::Protocol { script: "state", reply: format!("{} values", vals.len()) });
        }
        let mut it = vals.into_iter();
        let v = it.next().flatten();
        let scope = it.next().flatten();
        let ops = it.next().flatten().unwrap_or_default();
        let fields: Vec<Option<String>> = it.collect();
        if v.is_none() && scope.is_none() {
            return Ok(ReadState::missing(self.plan.fields.len()));
        }
        let scope = D::SPEC.stored_scope(scope.as_deref()).map(str::to_owned);
        let version = parse_version(v.as_deref())
            .ok_or_else(|| Error::Corrupt { key: key.to_owned(), reason: VERSION_REASON.into() })?;
        // Without its scope a document's list and change stream cannot be
        // named: damaged data, not the caller's mistake.
        if scope.as_deref().is_none_or(str::is_empty) {
            return Err(Error::Corrupt { key: key.to_owned(), reason: "`scope` is missing".into() });
        }
        Ok(ReadState { exists: true, version, scope, fields, ops, stamp: None })
    }

    /// Finds the document through a unique index (one round trip).
    ///
    /// # Errors
    /// Invalid values, connection errors, a corrupt document.
    pub async fn find(&self, query: UniqueQuery<D>) -> Result<Option<Stored<D>>> {
        observed("find", D::SPEC.kind, async {
            self.ensure_unique_ready(query.index()).await?;
            self.read(|| self.find_once(&query)).await
        })
        .await
    }

    async fn find_once(&self, query: &UniqueQuery<D>) -> Result<Option<Stored<D>>> {
        self.plan.check_slots(&self.valkey)?;
        let ix = self.plan.unique.get(query.index()).ok_or_else(|| {
            Error::InvalidArgument(format!("no unique index {} on {}", query.index(), D::SPEC.type_name))
        })?;
        let values: Vec<&str> = query.values().iter().map(String::as_str).collect();
        let ukey = ix.template.render(self.valkey.prefix(), &values).map_err(render_err)?;
        // Ids unique per scope: the script names the document by the
        // query's scope too.
        let scope = self.plan.query_scope(ix, query.values());
        let mut con = self.valkey.connection();
        let mut call = self.plan.find.call().key(&ukey).arg(self.valkey.prefix().as_str().as_bytes());
        if let Some(scope) = scope {
            call = call.arg(scope.as_bytes());
        }
        let value = call.run(&mut con).await.map_err(|e| Error::from_redis(e, &ukey))?;
        let reply: Option<Vec<Option<Vec<u8>>>> =
            redis::FromRedisValue::from_redis_value(value).map_err(|e| Error::from_redis(e.into(), &ukey))?;
        let Some(row) = reply else { return Ok(None) };
        let mut it = row.into_iter();
        let id = it.next().flatten().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        let mut map = HashMap::new();
        for (name, v) in
            ["v", "scope", "ops", "doc"].into_iter().map(str::to_owned).chain(self.plan.fields.iter().cloned()).zip(it)
        {
            if let Some(v) = v {
                map.insert(name, v);
            }
        }
        if map.is_empty() {
            let v = &self.valkey;
            tracing::warn!(index_key = v.shown(&ukey), id = v.shown(&id), "unique index points at a missing document");
            return Ok(None);
        }
        let key = self.plan.doc_key(self.valkey.prefix(), scope, &id)?;
        let stored = self.decode_hash(&key, &id, map)?;
        // The entry must describe the document it points at (else it is stale).
        let matches = ix.placeholders.iter().zip(query.values()).all(|(ph, want)| match ph {
            Ph::Id => stored.id == *want,
            Ph::Scope => stored.scope == *want,
            Ph::Field(i) => stored.state.fields.get(*i).and_then(Option::as_deref) == Some(want.as_str()),
            // A unique index is never multi-valued (the schema refuses it).
            Ph::Each => false,
        });
        if !matches {
            let v = &self.valkey;
            tracing::warn!(
                index_key = v.shown(&ukey),
                id = v.shown(&id),
                "unique index entry is stale: the document has other values"
            );
            return Ok(None);
        }
        self.valkey.span_scope(&stored.scope);
        Ok(Some(stored))
    }

    /// A page of ids from a group index: at most the page's count; see
    /// [`Page`] for what a walk over pages returns.
    ///
    /// # Errors
    /// Invalid values, connection errors, a key of the wrong type.
    pub async fn ids(&self, query: GroupQuery<D>, page: Page) -> Result<IdPage> {
        observed("ids", D::SPEC.kind, self.ids_page(&query, page)).await
    }

    /// [`Store::ids`] inside another operation (not an operation of its own).
    pub(crate) async fn ids_page(&self, query: &GroupQuery<D>, page: Page) -> Result<IdPage> {
        self.ensure_group_ready(query.index()).await?;
        let key = self.group_key(query)?;
        if let Some(scope) = self.index_scope(query) {
            self.valkey.span_scope(scope);
        }
        if D::SPEC.groups.get(query.index()).is_some_and(|g| g.kind().is_sorted()) {
            // A sorted index: by score, lowest first, paged like a sorted list.
            return self.read(|| self.zrange(&key, page.clone())).await;
        }
        self.read(|| self.sscan(&key, page.clone())).await
    }

    /// The ids of a sorted index with `min <= score <= max`, lowest score
    /// first (highest first when `reverse`), at most `limit` (up to
    /// [`Page::MAX`]), with their scores: the jobs due by now, the latest
    /// runs. The same [`Scored`] pairs a sorted-set family's handle reads.
    ///
    /// # Errors
    /// An index that is not sorted, a NaN bound ([`Error::InvalidArgument`]),
    /// invalid values, connection errors, a key of another type.
    pub async fn range(
        &self,
        query: GroupQuery<D>,
        min: f64,
        max: f64,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<Scored>> {
        observed("range", D::SPEC.kind, async {
            Self::check_sorted(&query)?;
            self.ensure_group_ready(query.index()).await?;
            if min.is_nan() || max.is_nan() {
                return Err(Error::InvalidArgument("a score bound must not be NaN".into()));
            }
            if let Some(scope) = self.index_scope(&query) {
                self.valkey.span_scope(scope);
            }
            self.range_at(&query, min, max, reverse, 0, limit).await
        })
        .await
    }

    /// Refuses a query of an index that is not sorted: only a sorted
    /// index has scores to range over.
    pub(crate) fn check_sorted(query: &GroupQuery<D>) -> Result<()> {
        if D::SPEC.groups.get(query.index()).is_none_or(|g| !g.kind().is_sorted()) {
            return Err(Error::InvalidArgument(format!(
                "index {} of {} is not a sorted index",
                query.index(),
                D::SPEC.type_name
            )));
        }
        Ok(())
    }

    /// [`Store::range`] from `offset` entries in (checked by the caller
    /// with [`Store::check_sorted`]).
    pub(crate) async fn range_at(
        &self,
        query: &GroupQuery<D>,
        min: f64,
        max: f64,
        reverse: bool,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<Scored>> {
        let key = self.group_key(query)?;
        let bound = crate::page::score_bound;
        let (from, to) = if reverse { (bound(max), bound(min)) } else { (bound(min), bound(max)) };
        let limit = limit.clamp(1, Page::MAX);
        self.read(|| async {
            let mut cmd = redis::cmd("ZRANGE");
            cmd.arg(&key).arg(&from).arg(&to).arg("BYSCORE");
            if reverse {
                cmd.arg("REV");
            }
            cmd.arg("LIMIT").arg(offset).arg(limit).arg("WITHSCORES");
            let mut con = self.valkey.connection();
            cmd.query_async(&mut con).await.map(Scored::pairs).map_err(|e| Error::from_redis(e, &key))
        })
        .await
    }

    /// A page of the per-scope list: by rank for a sorted-set list (ascending
    /// score), by `SSCAN` for a plain set.
    ///
    /// # Errors
    /// Invalid scope, connection errors.
    pub async fn list(&self, scope: &str, page: Page) -> Result<IdPage>
    where
        D: microdcs_schema::HasList,
    {
        observed("list", D::SPEC.kind, self.list_page(scope, page)).await
    }

    async fn list_page(&self, scope: &str, page: Page) -> Result<IdPage> {
        let key = self.scope_list_key(scope)?;
        if !D::SPEC.unscoped {
            self.valkey.span_scope(scope);
        }
        if !self.plan.sorted_list {
            return self.read(|| self.sscan(&key, page.clone())).await;
        }
        self.read(|| self.zrange(&key, page.clone())).await
    }

    /// A page of the one list of an unscoped type (`unscoped`), as
    /// [`Store::list`] reads a scope's.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a scoped type (its lists are per
    /// scope: [`Store::list`]), connection errors.
    pub async fn list_all(&self, page: Page) -> Result<IdPage>
    where
        D: microdcs_schema::HasList,
    {
        observed("list", D::SPEC.kind, async {
            if !D::SPEC.unscoped {
                return Err(Error::InvalidArgument(format!(
                    "`{}` has a list per scope: read it with `list(scope, page)`",
                    D::SPEC.type_name
                )));
            }
            self.list_page(microdcs_schema::UNSCOPED, page).await
        })
        .await
    }

    /// The key of `scope`'s list; for an unscoped type only its one list.
    fn scope_list_key(&self, scope: &str) -> Result<String> {
        if D::SPEC.unscoped && scope != microdcs_schema::UNSCOPED {
            return Err(Error::InvalidArgument(format!(
                "`{}` is unscoped: its list is `list_all`, not the list of scope `{scope}`",
                D::SPEC.type_name
            )));
        }
        self.plan
            .list_key(self.valkey.prefix(), scope)
            .ok_or_else(|| Error::InvalidArgument(format!("{} has no list", D::SPEC.type_name)))?
    }

    /// How many ids the per-scope list holds, without reading them (one
    /// `ZCARD` for a sorted-set list, `SCARD` for a plain set): what
    /// [`Store::list`] walks, counted.
    ///
    /// # Errors
    /// As [`Store::list`]; [`Error::WrongType`] for a list key of another
    /// type.
    pub async fn count(&self, scope: &str) -> Result<u64>
    where
        D: microdcs_schema::HasList,
    {
        observed("count", D::SPEC.kind, async {
            let key = self.scope_list_key(scope)?;
            self.valkey.span_scope(scope);
            let command = if self.plan.sorted_list { "ZCARD" } else { "SCARD" };
            self.read(|| self.card(command, &key)).await
        })
        .await
    }

    /// [`Store::count`] of the one list of an unscoped type.
    ///
    /// # Errors
    /// As [`Store::list_all`].
    pub async fn count_all(&self) -> Result<u64>
    where
        D: microdcs_schema::HasList,
    {
        if !D::SPEC.unscoped {
            return Err(Error::InvalidArgument(format!(
                "`{}` has a list per scope: count it with `count(scope)`",
                D::SPEC.type_name
            )));
        }
        self.count(microdcs_schema::UNSCOPED).await
    }

    /// How many ids a group index entry holds, without reading them (one
    /// `SCARD`, or `ZCARD` for a sorted index): what [`Store::ids`] walks,
    /// counted. Of a bounded sorted index, the ids it keeps.
    ///
    /// # Errors
    /// As [`Store::ids`].
    pub async fn count_ids(&self, query: GroupQuery<D>) -> Result<u64> {
        observed("count_ids", D::SPEC.kind, async {
            self.ensure_group_ready(query.index()).await?;
            let key = self.group_key(&query)?;
            let sorted = D::SPEC.groups.get(query.index()).is_some_and(|g| g.kind().is_sorted());
            self.read(|| self.card(if sorted { "ZCARD" } else { "SCARD" }, &key)).await
        })
        .await
    }

    /// The size of the set or sorted set at `key` (`command` is `SCARD`
    /// or `ZCARD`), once.
    async fn card(&self, command: &'static str, key: &str) -> Result<u64> {
        let mut con = self.valkey.connection();
        redis::cmd(command).arg(key).query_async(&mut con).await.map_err(|e| Error::from_redis(e, key))
    }

    async fn zrange(&self, key: &str, page: Page) -> Result<IdPage> {
        page.check_walk(key)?;
        let count = page.count.max(1);
        let (anchor, score) = match &page.at {
            PageAt::After { score, id } => (id.as_str(), score.as_str()),
            PageAt::Scan { .. } => {
                return Err(Error::InvalidArgument("a set walk's page handed to a sorted walk".into()));
            }
            PageAt::Start => ("", ""),
        };
        let mut con = self.valkey.connection();
        let n = count.to_string();
        let direction: &[u8] = if page.descending { b"down" } else { b"up" };
        let call = PAGE_AFTER_SCRIPT
            .call()
            .key(key)
            .arg(n.as_bytes())
            .arg(anchor.as_bytes())
            .arg(score.as_bytes())
            .arg(direction);
        let got: Vec<String> = call.run(&mut con).await.and_then(reply).map_err(|e| Error::from_redis(e, key))?;
        let mut ids = Vec::with_capacity(got.len() / 2);
        let mut last = None;
        for pair in got.chunks_exact(2) {
            ids.push(pair[0].clone());
            last = Some(pair[1].clone());
        }
        let next = match (ids.len() == count, last, ids.last()) {
            (true, Some(score), Some(id)) => Some(page.next_of(key, PageAt::After { score, id: id.clone() })),
            _ => None,
        };
        Ok(IdPage { ids, next })
    }

    async fn sscan(&self, key: &str, page: Page) -> Result<IdPage> {
        crate::page::sscan_page(&self.valkey, key, page).await
    }
}

static PAGE_AFTER_SCRIPT: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::read_only(PAGE_AFTER));

/// One page of a sorted set after an anchor (score, id), with scores, in
/// either direction. While the anchor is still where the last page left
/// it, continue from its rank; if it moved or left, continue after its old
/// position: the rest of its score's members past it, then the scores
/// beyond. Read-only.
const PAGE_AFTER: &str = include_str!("page_after.lua");
