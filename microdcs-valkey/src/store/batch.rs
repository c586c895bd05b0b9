//! Many documents at a time: bulk writes, claims from an index, index reads
//! that return documents, and a walk over every document of the type.

use futures_util::StreamExt;
use microdcs_schema::{Document, GroupQuery};

use super::Store;
use super::render_err;
use super::types::{IdPage, Page, PutOutcome, Stored};
use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::observe::observed;

/// What a claim makes of one document it read.
enum Claimable {
    /// In the queried entry (within the bound).
    Yes,
    /// Not in the queried entry: taken by another worker, or a stale entry.
    No,
    /// Scored above the bound of a bounded sorted claim.
    AboveBound,
}

/// How many writes of one [`Store::put_many`] are in flight at once on the
/// multiplexed connection.
const IN_FLIGHT: usize = 64;

/// A page of documents and where the next one starts (`None` at the end).
#[derive(Debug)]
pub struct DocPage<D, P> {
    /// The documents of this page.
    pub documents: Vec<Stored<D>>,
    /// Documents of this page that could not be read (corrupt, a key of
    /// another type, a text the codec refuses), each its typed error: the
    /// walk goes on past them, and nothing is handed out as a document.
    pub damaged: Vec<Error>,
    /// Pass back for the next page.
    pub next: Option<P>,
}

impl<D, P> crate::observe::Outcome for DocPage<D, P> {
    fn outcome(&self) -> &'static str {
        "ok"
    }
}

impl<D: Document, C: Codec<D>> Store<D, C> {
    /// Writes many documents, each with its own generated script (each
    /// atomic, with every check and the retry rule of [`Store::put`]), up
    /// to 64 in flight at once on the one connection: a bulk load at
    /// pipeline speed. One outcome per document, in order; one failing
    /// does not stop the others.
    pub async fn put_many(&self, docs: &[D], expect: crate::Expect) -> Vec<Result<PutOutcome>> {
        // By position, not `docs.iter()`: a closure over `&D` would make
        // the future's lifetime higher-ranked, and rustc could then not see
        // that the whole future is `Send`.
        futures_util::stream::iter((0..docs.len()).map(|i| self.put(&docs[i], expect)))
            .buffered(IN_FLIGHT)
            .collect()
            .await
    }

    /// Claims one document of a group index and writes `change(&doc)` over
    /// it (say, queued -> running, which moves it out of the group): many
    /// workers claiming from one group each get a different document, and
    /// each document is claimed once however many workers run.
    ///
    /// The store, not `change`, makes that hold: a document is handed to
    /// `change` only if its stored index fields put it in the queried entry
    /// (the group with the queried values), and the write expects the
    /// version read, so it applies only while the document is still there.
    /// `change` returns `None` to pass a document over. A plain or
    /// conditional group is taken at random; a sorted index lowest score
    /// first (see [`Store::claim_due`] for a bound on the score).
    ///
    /// `None` when the group is empty, or when every id taken in
    /// [`Store::CLAIM_ROUNDS`] rounds of 16 was passed over (claimed by
    /// others meanwhile, or refused by `change`).
    ///
    /// A write whose reply was lost is looked up by its operation id before
    /// the claim gives up on it: a claim that applied is returned, never
    /// left behind unowned. With a durability that waits for replicas
    /// (`WriteReplicas`), a claim found applied that way is sent again
    /// (recognised by its id, written once) so its replicas are waited
    /// for; one that applied but that its replicas did not confirm in time
    /// is still returned, with a warning in the log, rather than reported
    /// as [`Error::NotReplicated`]: the document has left its group, and
    /// the error would leave it held by no one. If the primary then fails
    /// before a replica has the claim, the document is back in its group
    /// and may be claimed again (a job runs at least once).
    ///
    /// # Errors
    /// As [`Store::get`] and [`Store::update`] (but not
    /// [`Error::NotReplicated`], see above); [`Error::Corrupt`] for a
    /// stored score that is not a number.
    pub async fn claim<F>(&self, query: GroupQuery<D>, change: F) -> Result<Option<Stored<D>>>
    where
        F: FnMut(&D) -> Option<D>,
    {
        observed("claim", D::SPEC.kind, self.claim_inner(query, None, change)).await
    }

    /// Claims the lowest-scored document of a sorted index whose score is
    /// at most `max_score` (the oldest due job: `max_score` is now), as
    /// [`Store::claim`] does.
    ///
    /// # Errors
    /// As [`Store::claim`]; [`Error::InvalidArgument`] for an index that is
    /// not sorted or a NaN bound.
    pub async fn claim_due<F>(&self, query: GroupQuery<D>, max_score: f64, change: F) -> Result<Option<Stored<D>>>
    where
        F: FnMut(&D) -> Option<D>,
    {
        if max_score.is_nan() {
            return Err(Error::InvalidArgument("a score bound must not be NaN".into()));
        }
        observed("claim", D::SPEC.kind, self.claim_inner(query, Some(max_score), change)).await
    }

    /// How many rounds of ids a claim takes before it reports `None`.
    pub const CLAIM_ROUNDS: usize = 16;

    async fn claim_inner<F>(&self, query: GroupQuery<D>, max: Option<f64>, mut change: F) -> Result<Option<Stored<D>>>
    where
        F: FnMut(&D) -> Option<D>,
    {
        self.ensure_group_ready(query.index()).await?;
        let ix = self.plan.groups.get(query.index()).ok_or_else(|| {
            Error::InvalidArgument(format!("no group index {} on {}", query.index(), D::SPEC.type_name))
        })?;
        let sorted = D::SPEC.groups[query.index()].kind().is_sorted();
        if max.is_some() && !sorted {
            return Err(Error::InvalidArgument(format!(
                "`{}` of {} is not a sorted index: claim_due takes a sorted(...) index, claim any group",
                D::SPEC.groups[query.index()].name,
                D::SPEC.type_name
            )));
        }
        let key = self.group_key(&query)?;
        let scope = self.group_scope(&query);
        // A sorted index is walked lowest score first, page after page, so
        // ids passed over (refused by `change`, claimed meanwhile) never
        // hide the ones after them; the walk starts again at its end.
        let mut walk = Page::first(16);
        for _ in 0..Self::CLAIM_ROUNDS {
            let ids: Vec<String> = if sorted {
                let got = self.ids_page(&query, walk.clone()).await?;
                walk = got.next.unwrap_or_else(|| Page::first(16));
                got.ids
            } else {
                self.read(|| async {
                    let mut con = self.valkey.connection();
                    redis::cmd("SRANDMEMBER")
                        .arg(&key)
                        .arg(16)
                        .query_async(&mut con)
                        .await
                        .map_err(|e| Error::from_redis(e, &key))
                })
                .await?
            };
            if ids.is_empty() {
                return Ok(None);
            }
            for id in ids {
                // A member that is no valid id names no document: passed
                // over (verify reports it), never the end of the claim.
                if self.plan.doc_key(self.valkey.prefix(), scope, &id).is_err() {
                    tracing::warn!(
                        index = self.valkey.shown(&key),
                        "claim: an index member that is not a valid id is passed over"
                    );
                    continue;
                }
                let Some(mut read) = self.read(|| self.get_once(scope, &id)).await? else { continue };
                match self.claimable(ix, &key, max, &read)? {
                    Claimable::Yes => {}
                    Claimable::No => continue,
                    // Re-scored since the page was read: the ids after it
                    // may still be due, so only this one is passed over.
                    Claimable::AboveBound => continue,
                }
                let Some(next) = change(&read.doc) else { continue };
                // Only a sorted index's marker is a score (a member's is `1`,
                // a multi-valued index's its values).
                let read_score = ix
                    .marker
                    .filter(|_| ix.spec.kind().is_sorted())
                    .and_then(|m| read.state.fields.get(m).and_then(Option::as_deref))
                    .and_then(|t| t.parse::<f64>().ok());
                self.check_leaves(query.index(), &key, max, read_score, &next)?;
                if self.claim_write(&mut read, next).await? {
                    return Ok(Some(read));
                }
                // Another claimer took it first: on to the next.
                metrics::counter!(crate::observe::CONTENTION_RETRIES, "microdcs.target" => D::SPEC.kind).increment(1);
            }
        }
        Ok(None)
    }

    /// Whether the stored fields of `read` put it in the entry at `key`
    /// (and, with `max`, score it at most `max`). The write that follows
    /// expects this version, so what holds of the read holds at the write.
    fn claimable(
        &self,
        ix: &super::plan::IndexPlan,
        key: &str,
        max: Option<f64>,
        read: &Stored<D>,
    ) -> Result<Claimable> {
        if !self.plan.old_keys(ix, &self.valkey, &read.id, &read.state)?.iter().any(|k| k == key) {
            return Ok(Claimable::No);
        }
        // A sorted index's score is checked even without a bound: a
        // corrupt one is refused, not claimed past.
        let m = match (max, ix.marker) {
            (Some(_), Some(m)) => m,
            (None, Some(m)) if ix.spec.kind().is_sorted() => m,
            _ => return Ok(Claimable::Yes),
        };
        let text = read.state.fields.get(m).and_then(Option::as_deref).unwrap_or_default();
        match text.parse::<f64>() {
            Ok(score) if score.is_finite() && max.is_none_or(|max| score <= max) => Ok(Claimable::Yes),
            Ok(score) if score.is_finite() => Ok(Claimable::AboveBound),
            _ => Err(Error::Corrupt {
                key: self.plan.doc_key(self.valkey.prefix(), Some(&read.scope), &read.id)?,
                reason: format!("stored score `{text}` of a sorted index is not a finite number"),
            }),
        }
    }

    /// Refuses a claim whose `next` would leave the document where it
    /// could be claimed again at once: still in the queried entry with the
    /// same values (for a bounded sorted claim, still scored at most the
    /// bound; for an unbounded one, with the same score). A claim moves the
    /// document, so each is claimed once where it was.
    fn check_leaves(&self, index: usize, key: &str, max: Option<f64>, read_score: Option<f64>, next: &D) -> Result<()> {
        let entries = next.index_entries(self.valkey.prefix())?;
        let Some(entry) = entries.groups.get(index).and_then(Option::as_ref).filter(|e| e.keys().any(|k| k == key))
        else {
            return Ok(());
        };
        let name = D::SPEC.groups[index].name;
        let score = entry
            .fields
            .iter()
            .filter(|_| D::SPEC.groups[index].kind().is_sorted())
            .find(|(f, _)| *f == name)
            .and_then(|(_, v)| v.parse::<f64>().ok());
        match (max, score) {
            // Bounded: pushed past the bound (a retry queue's next attempt).
            (Some(max), Some(score)) if score > max => return Ok(()),
            // Unbounded on a sorted index: re-scored is moved (later).
            (None, Some(score)) if read_score.is_some_and(|r| r != score) => return Ok(()),
            _ => {}
        }
        Err(Error::InvalidArgument(format!(
            "claim of `{}`: `change` keeps the document in `{name}` {}, where it would be claimed again; \
             a claim must move it out (another state, no score, or a score past the bound)",
            entries.id,
            if max.is_some() { "within the bound" } else { "with the same values" }
        )))
    }

    /// The claiming write, with its own operation id: when every attempt
    /// lost its reply, the document is read again and the id looked up in
    /// its history, so a claim that applied is reported as ours.
    async fn claim_write(&self, read: &mut Stored<D>, next: D) -> Result<bool> {
        let op = crate::op_id::new_op_id();
        let out = self.update(read, &next).op(&op).await;
        let version = match out {
            Ok(PutOutcome::Written { version }) => version,
            Ok(_) => return Ok(false),
            // Applied, and its replicas did not confirm in time: the claim
            // is this caller's all the same. Reported as the error, the
            // document would be out of its group and held by no one.
            Err(Error::NotReplicated { version, reason, .. }) => {
                self.unconfirmed_claim(read, &reason);
                version
            }
            Err(e @ Error::UnknownOutcome { .. }) => {
                let key = self.plan.doc_key(self.valkey.prefix(), Some(&read.scope), &read.id)?;
                let Ok(state) = self.read_state(&key).await else { return Err(e) };
                let stored = microdcs_schema::lua::stored_op_id(&op);
                match super::write::applied_version(&state.ops, state.version, &stored) {
                    // Found applied by a read, which waits for no replica:
                    // with a durability that waits, the same write again
                    // (recognised by its id, nothing written twice) waits.
                    Some(v) if self.valkey.write_options().durability.waits() => {
                        match self.update(read, &next).op(&op).await {
                            Ok(PutOutcome::Written { version }) => version,
                            Err(Error::NotReplicated { version, reason, .. }) => {
                                self.unconfirmed_claim(read, &reason);
                                version
                            }
                            Ok(_) | Err(_) => {
                                self.unconfirmed_claim(read, "its replicas could not be asked again");
                                v
                            }
                        }
                    }
                    Some(v) => v,
                    // Moved on by others, and within the history this id
                    // would still be in: not ours. Moved further, the
                    // history cannot tell: unknown.
                    None if state.version != read.version
                        && state.version.saturating_sub(read.version)
                            < u64::from(self.valkey.write_options().op_history) =>
                    {
                        return Ok(false);
                    }
                    // Not applied and nothing else happened: the claim is
                    // still open, but this call cannot reach the server.
                    None => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        self.advance(read, next, version, &microdcs_schema::lua::stored_op_id(&op))?;
        Ok(true)
    }

    /// A claim applied whose replicas did not confirm it: handed to the
    /// caller, and said in the log.
    fn unconfirmed_claim(&self, read: &Stored<D>, reason: &str) {
        tracing::warn!(
            kind = D::SPEC.kind,
            scope = %read.scope,
            id = %read.id,
            reason,
            "claim applied but not confirmed by the replicas asked for; handed to the caller"
        );
    }

    /// The documents of a page of a group index (ids read, then the
    /// documents in one round trip). A document deleted between the two
    /// reads is left out, so a page may hold fewer than its count.
    ///
    /// # Errors
    /// As [`Store::ids`]; a damaged document is listed in
    /// [`DocPage::damaged`], not an error of the call.
    pub async fn docs(&self, query: GroupQuery<D>, page: Page) -> Result<DocPage<D, Page>> {
        observed("docs", D::SPEC.kind, self.docs_inner(&query, page)).await
    }

    async fn docs_inner(&self, query: &GroupQuery<D>, page: Page) -> Result<DocPage<D, Page>> {
        let scope = self.group_scope(query).map(str::to_owned);
        let index_key = self.group_key(query)?;
        let IdPage { ids, next } = self.ids_page(query, page).await?;
        let prefix = self.valkey.prefix();
        // A member that is no valid id is damage of this page, listed with
        // the rest: the page and its token go on.
        let (mut good, mut keys, mut bad) = (Vec::new(), Vec::new(), Vec::new());
        for id in ids {
            match self.plan.doc_key(prefix, scope.as_deref(), &id) {
                Ok(key) => {
                    keys.push(key);
                    good.push(id);
                }
                Err(e) => bad.push(Error::Corrupt {
                    key: index_key.clone(),
                    reason: format!("an index member is not a valid id: {e}"),
                }),
            }
        }
        let (documents, mut damaged) = self.read_each(&good, &keys).await?;
        damaged.extend(bad);
        Ok(DocPage { documents, damaged, next })
    }

    /// The documents of `ids` in `scope` (a page of its list): those read,
    /// and the typed errors of those that could not be (an id that names
    /// no key, a damaged document). A document of another scope is left
    /// out. Connection errors fail the call.
    #[cfg(feature = "consumers")]
    pub(crate) async fn each_in(&self, scope: &str, ids: &[String]) -> Result<(Vec<Stored<D>>, Vec<Error>)> {
        let prefix = self.valkey.prefix();
        let (mut good, mut keys, mut bad) = (Vec::new(), Vec::new(), Vec::new());
        for id in ids {
            match self.plan.doc_key(prefix, Some(scope), id) {
                Ok(key) => {
                    keys.push(key);
                    good.push(id.clone());
                }
                Err(e) => bad.push(Error::Corrupt {
                    key: format!("list of scope `{scope}`"),
                    reason: format!("a list member is not a valid id: {e}"),
                }),
            }
        }
        let (mut documents, mut damaged) = self.read_each(&good, &keys).await?;
        documents.retain(|d| d.scope == scope);
        damaged.extend(bad);
        Ok((documents, damaged))
    }

    /// The documents of `ids`, `MAX_MANY` to a round trip: those read, and
    /// the typed errors of those that could not be.
    async fn read_each(&self, ids: &[String], keys: &[String]) -> Result<(Vec<Stored<D>>, Vec<Error>)> {
        let (mut documents, mut damaged) = (Vec::new(), Vec::new());
        for (chunk, keys) in ids.chunks(Self::MAX_MANY).zip(keys.chunks(Self::MAX_MANY)) {
            for got in self.read(|| self.get_each_once(chunk, keys)).await? {
                match got {
                    Ok(Some(s)) => documents.push(s),
                    Ok(None) => {}
                    Err(e) => damaged.push(e),
                }
            }
        }
        Ok((documents, damaged))
    }

    /// The scopes that hold documents of this type (its scope registry),
    /// a page at a time (see [`Page`]).
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn scopes(&self, page: Page) -> Result<IdPage> {
        let key = self.plan.registry_key.clone();
        observed("scopes", D::SPEC.kind, self.read(|| crate::page::sscan_page(&self.valkey, &key, page.clone()))).await
    }

    /// A walk over every document of this type, `count` keys at a time:
    /// `SCAN` over the document template, then the documents in one round
    /// trip. Start with cursor 0; the next cursor comes back until the walk
    /// ends (a document present for the whole walk comes at least once; one
    /// written meanwhile may or may not). The cursor is the progress.
    ///
    /// `count` is at most [`Store::MAX_MANY`]. A damaged document is listed
    /// in [`DocPage::damaged`] and the walk goes on.
    ///
    /// # Errors
    /// Connection errors.
    pub async fn scan(&self, cursor: u64, count: usize) -> Result<DocPage<D, u64>> {
        observed("scan", D::SPEC.kind, self.scan_inner(cursor, count)).await
    }

    async fn scan_inner(&self, cursor: u64, count: usize) -> Result<DocPage<D, u64>> {
        let prefix = self.valkey.prefix().clone();
        let pattern = self.plan.doc_pattern(&prefix)?;
        let count = count.clamp(1, Self::MAX_MANY);
        let (next, keys) = crate::retry::scan_step(&self.valkey, cursor, &pattern, count, "hash").await?;
        // Keys that only look like documents (`joborder:list:s1`) drop out.
        let (ids, keys): (Vec<String>, Vec<String>) =
            keys.into_iter().filter_map(|k| self.plan.doc_of_key(&prefix, &k).map(|(id, _)| (id, k))).unzip();
        let (documents, damaged) = self.read_each(&ids, &keys).await?;
        Ok(DocPage { documents, damaged, next: (next != 0).then_some(next) })
    }

    /// The scope a group query names, for a type with ids per scope.
    /// Removes `id` from the sorted index `query` names, but only while
    /// its document (in `scope`) does not exist: an entry without its
    /// document is damage (every write keeps the index exact), and a
    /// document created meanwhile wrote its entry in the same script as
    /// itself, so the check and the removal in one script cannot take a
    /// live entry. Returns whether the entry was removed.
    #[cfg(feature = "consumers")]
    pub(crate) async fn drop_orphan_entry(&self, query: &GroupQuery<D>, scope: &str, id: &str) -> Result<bool> {
        let index_key = self.group_key(query)?;
        let doc_key = self.plan.doc_key(self.valkey.prefix(), Some(scope), id)?;
        let call = ORPHAN_SCRIPT.call().key(&doc_key).key(&index_key).arg(id.as_bytes());
        let call = &call;
        let v = crate::retry::repeatable(&self.valkey, "orphan entry", &index_key, |mut con| async move {
            call.run(&mut con).await
        })
        .await
        .map_err(|f| f.into_error(&index_key))?;
        let removed: i64 = crate::retry::reply(v).map_err(|e| Error::from_redis(e, &index_key))?;
        Ok(removed == 1)
    }

    /// The value a group query gives the index's `{scope}` placeholder;
    /// `None` for an index without one (one key for all scopes).
    pub(crate) fn index_scope<'q>(&self, query: &'q GroupQuery<D>) -> Option<&'q str> {
        let ix = self.plan.groups.get(query.index())?;
        ix.placeholders
            .iter()
            .zip(query.values())
            .find(|(ph, _)| matches!(ph, super::plan::Ph::Scope))
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn group_scope<'q>(&self, query: &'q GroupQuery<D>) -> Option<&'q str> {
        self.plan.groups.get(query.index()).and_then(|ix| self.plan.query_scope(ix, query.values()))
    }

    pub(super) fn group_key(&self, query: &GroupQuery<D>) -> Result<String> {
        let ix = self.plan.groups.get(query.index()).ok_or_else(|| {
            Error::InvalidArgument(format!("no group index {} on {}", query.index(), D::SPEC.type_name))
        })?;
        let values: Vec<&str> = query.values().iter().map(String::as_str).collect();
        ix.template.render(self.valkey.prefix(), &values).map_err(render_err)
    }
}

/// Removes a sorted-index entry whose document is absent.
#[cfg(feature = "consumers")]
const ORPHAN_ENTRY: &str = "\
-- KEYS[1] document hash; KEYS[2] sorted index; ARGV[1] the id.
-- Returns 1 if the entry was removed, 0 if the document exists or the entry is gone.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
return redis.call('ZREM', KEYS[2], ARGV[1])
";

#[cfg(feature = "consumers")]
static ORPHAN_SCRIPT: std::sync::LazyLock<crate::retry::LuaScript> =
    std::sync::LazyLock::new(|| crate::retry::LuaScript::new(ORPHAN_ENTRY));
