//! The document types of a keyspace as stores behind one object-safe
//! trait, so the admin commands loop over kinds instead of types.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use microdcs_schema::{DocumentSpec, InKeyspace, Keyspace};

use crate::client::Valkey;
use crate::codec::{Codec, Json};
use crate::each::{DocumentVisitor, EachDocument};
use crate::error::{Error, Result};
use crate::store::{BackfillOptions, BackfillReport, IndexState, LiveWriters, MaintenanceOptions, Report, Store};

type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// One document type's store, its type erased.
pub(super) trait Kind: Send + Sync {
    fn spec(&self) -> &'static DocumentSpec<'static>;
    fn verify<'a>(&'a self, opts: &'a MaintenanceOptions<'a>) -> Fut<'a, Report>;
    fn rebuild<'a>(&'a self, opts: &'a MaintenanceOptions<'a>) -> Fut<'a, Report>;
    fn accept<'a>(&'a self, opts: &'a MaintenanceOptions<'a>) -> Fut<'a, Report>;
    fn needs_rebuild(&self) -> Fut<'_, Vec<String>>;
    fn backfill<'a>(&'a self, opts: &'a BackfillOptions) -> Fut<'a, BackfillReport>;
    fn index_states(&self) -> Fut<'_, Vec<(&'static str, IndexState)>>;
    fn writers(&self) -> Fut<'_, LiveWriters>;
    fn record_layout<'a>(&'a self, index: &'a str) -> Fut<'a, ()>;

    /// `list` (when the type has one) and its index names.
    fn index_names(&self) -> Vec<&'static str> {
        let spec = self.spec();
        spec.index_layouts().into_iter().map(|l| l.index).collect()
    }
}

struct Typed<D, C>(Store<D, C>);

impl<D: microdcs_schema::Document + 'static, C: Codec<D> + 'static> Kind for Typed<D, C> {
    fn spec(&self) -> &'static DocumentSpec<'static> {
        &D::SPEC
    }
    fn verify<'a>(&'a self, opts: &'a MaintenanceOptions<'a>) -> Fut<'a, Report> {
        Box::pin(self.0.verify(opts))
    }
    fn rebuild<'a>(&'a self, opts: &'a MaintenanceOptions<'a>) -> Fut<'a, Report> {
        Box::pin(self.0.rebuild(opts))
    }
    fn accept<'a>(&'a self, opts: &'a MaintenanceOptions<'a>) -> Fut<'a, Report> {
        Box::pin(self.0.accept_layouts(opts))
    }
    fn needs_rebuild(&self) -> Fut<'_, Vec<String>> {
        Box::pin(self.0.needs_rebuild())
    }
    fn backfill<'a>(&'a self, opts: &'a BackfillOptions) -> Fut<'a, BackfillReport> {
        Box::pin(self.0.backfill(opts))
    }
    fn index_states(&self) -> Fut<'_, Vec<(&'static str, IndexState)>> {
        Box::pin(self.0.index_states())
    }
    fn writers(&self) -> Fut<'_, LiveWriters> {
        Box::pin(self.0.writers())
    }
    fn record_layout<'a>(&'a self, index: &'a str) -> Fut<'a, ()> {
        Box::pin(self.0.record_layout(index))
    }
}

/// Every document type of keyspace `K`: stores of those the JSON codec
/// reads (it reads `CompactJson`'s texts too), and the kinds of the others.
pub(super) struct Kinds<K> {
    stores: Vec<Box<dyn Kind>>,
    /// Kinds without serde impls: named, never opened.
    pub(super) skipped: Vec<&'static str>,
    _keyspace: PhantomData<K>,
}

struct Collect<'v> {
    valkey: &'v Valkey,
    stores: Vec<Box<dyn Kind>>,
    skipped: Vec<&'static str>,
}

impl<K: Keyspace> DocumentVisitor<K> for Collect<'_> {
    fn visit<D: InKeyspace<K> + 'static>(&mut self)
    where
        Json: Codec<D>,
    {
        self.stores.push(Box::new(Typed(Store::<D, Json>::new(self.valkey.clone(), Json))));
    }

    fn skip(&mut self, spec: &'static DocumentSpec<'static>) {
        if !spec.is_refused() {
            self.skipped.push(spec.kind);
        }
    }
}

impl<K: EachDocument> Kinds<K> {
    pub(super) fn open(valkey: &Valkey) -> Self {
        let mut c = Collect { valkey, stores: Vec::new(), skipped: Vec::new() };
        K::each_document(&mut c);
        Kinds { stores: c.stores, skipped: c.skipped, _keyspace: PhantomData }
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &dyn Kind> {
        self.stores.iter().map(|b| &**b)
    }

    /// All kinds, or the one named: an unknown name is an error that lists
    /// the kinds, never an empty run.
    pub(super) fn select(&self, kind: Option<&str>) -> Result<Vec<&dyn Kind>> {
        let Some(want) = kind else { return Ok(self.all().collect()) };
        let found: Vec<&dyn Kind> = self.all().filter(|k| k.spec().kind == want).collect();
        if found.is_empty() {
            let names: Vec<&str> = self.all().map(|k| k.spec().kind).collect();
            return Err(Error::InvalidArgument(format!("unknown kind `{want}` (kinds: {})", names.join(", "))));
        }
        Ok(found)
    }

    /// `(kind, building indexes)` for every kind with any.
    pub(super) async fn building(&self) -> Result<Vec<(&'static str, Vec<String>)>> {
        let mut out = Vec::new();
        for k in self.all() {
            let b: Vec<String> = k
                .index_states()
                .await?
                .into_iter()
                .filter(|(_, s)| *s == IndexState::Building)
                .map(|(n, _)| n.to_owned())
                .collect();
            if !b.is_empty() {
                out.push((k.spec().kind, b));
            }
        }
        Ok(out)
    }

    /// `(kind, live writers)` for every kind with any live writer.
    pub(super) async fn writers(&self) -> Result<Vec<(&'static str, LiveWriters)>> {
        let mut out = Vec::new();
        for k in self.all() {
            let w = k.writers().await?;
            if !w.schemas.is_empty() || w.damaged > 0 {
                out.push((k.spec().kind, w));
            }
        }
        Ok(out)
    }

    /// `(kind, flagged indexes)` for every kind with any.
    pub(super) async fn flagged(&self) -> Result<Vec<(&'static str, Vec<String>)>> {
        let mut out = Vec::new();
        for k in self.all() {
            let f = k.needs_rebuild().await?;
            if !f.is_empty() {
                out.push((k.spec().kind, f));
            }
        }
        Ok(out)
    }
}
