//! Many documents at a time: bulk writes, claims from an index, index reads
//! that return documents, and a walk over every document of the type.

use futures_util::StreamExt;
use microdcs_schema::{Document, GroupQuery};

use super::Store;
use super::render_err;
use super::types::{IdPage, Page, PutOutcome, Stored};
use crate::codec::Codec;
use crate::error::{Error, Result};

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

    /// Claims one document of a group index: takes ids from it at random,
    /// reads each, and writes `change(&doc)` over it with a version
    /// expectation (say, queued -> running, which moves it out of the
    /// group). A document another worker claimed first (a conflict, or one
    /// gone or no longer asked for by `change`) is passed over. `None` when
    /// the group is empty or every id taken was passed over. Many workers
    /// claiming from one group each get a different document: the version
    /// check lets exactly one write win.
    ///
    /// # Errors
    /// As [`Store::get`] and [`Store::update`].
    pub async fn claim<F>(&self, query: GroupQuery<D>, mut change: F) -> Result<Option<Stored<D>>>
    where
        F: FnMut(&D) -> Option<D>,
    {
        let key = self.group_key(&query)?;
        let scope = self.group_scope(&query);
        // A few rounds of random ids: with many workers on one group most
        // of a round may be taken by the time it is read.
        for _ in 0..8 {
            let ids: Vec<String> = self
                .read(|| async {
                    let mut con = self.valkey.connection();
                    redis::cmd("SRANDMEMBER")
                        .arg(&key)
                        .arg(16)
                        .query_async(&mut con)
                        .await
                        .map_err(|e| Error::from_redis(e, &key))
                })
                .await?;
            if ids.is_empty() {
                return Ok(None);
            }
            for id in ids {
                let Some(read) = self.read(|| self.get_once(scope, &id)).await? else { continue };
                let Some(next) = change(&read.doc) else { continue };
                let mut read = read;
                if let PutOutcome::Written { .. } = self.update_in_place(&mut read, next).await? {
                    return Ok(Some(read));
                }
            }
        }
        Ok(None)
    }

    /// The documents of a page of a group index (ids read, then the
    /// documents in one round trip). A document deleted between the two
    /// reads is left out, so a page may hold fewer than its count.
    ///
    /// # Errors
    /// As [`Store::ids`]; a damaged document is listed in
    /// [`DocPage::damaged`], not an error of the call.
    pub async fn docs(&self, query: GroupQuery<D>, page: Page) -> Result<DocPage<D, Page>> {
        let scope = self.group_scope(&query).map(str::to_owned);
        let IdPage { ids, next } = self.ids(query, page).await?;
        let prefix = self.valkey.prefix();
        let keys = ids.iter().map(|id| self.plan.doc_key(prefix, scope.as_deref(), id)).collect::<Result<Vec<_>>>()?;
        let (documents, damaged) = self.read_each(&ids, &keys).await?;
        Ok(DocPage { documents, damaged, next })
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
        self.read(|| super::sscan_page(&self.valkey, &key, page.clone())).await
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
        let prefix = self.valkey.prefix().clone();
        let pattern = self.plan.doc_pattern(&prefix)?;
        let count = count.clamp(1, Self::MAX_MANY);
        let (next, keys): (u64, Vec<String>) = self
            .read(|| async {
                let mut con = self.valkey.connection();
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(count)
                    .arg("TYPE")
                    .arg("hash")
                    .query_async(&mut con)
                    .await
                    .map_err(|e| Error::from_redis(e, &pattern))
            })
            .await?;
        // Keys that only look like documents (`joborder:list:s1`) drop out.
        let (ids, keys): (Vec<String>, Vec<String>) =
            keys.into_iter().filter_map(|k| self.plan.doc_of_key(&prefix, &k).map(|(id, _)| (id, k))).unzip();
        let (documents, damaged) = self.read_each(&ids, &keys).await?;
        Ok(DocPage { documents, damaged, next: (next != 0).then_some(next) })
    }

    /// The scope a group query names, for a type with ids per scope.
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
