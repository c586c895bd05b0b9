//! A keyspace's document types, one call per type: how a tool written once
//! (the admin tool) gets a typed store of every type a `keyspace!` lists.

use std::marker::PhantomData;

use microdcs_schema::{Document, DocumentSpec, InKeyspace, Keyspace};

use crate::codec::{Codec, Json};

/// Called once per document type of keyspace `K`, in the order its
/// `documents: [...]` lists them ([`EachDocument::each_document`]).
pub trait DocumentVisitor<K: Keyspace> {
    /// A type the JSON codec stores (every type deriving serde's traits).
    fn visit<D: InKeyspace<K> + 'static>(&mut self)
    where
        Json: Codec<D>;

    /// A type the JSON codec cannot store (no serde impls): a tool can
    /// name it but open no store of it.
    fn skip(&mut self, spec: &'static DocumentSpec<'static>);
}

/// The document types of a keyspace, one [`DocumentVisitor`] call each:
/// implemented by `keyspace!`.
pub trait EachDocument: Keyspace {
    /// Calls `v` once per document type.
    fn each_document<V: DocumentVisitor<Self>>(v: &mut V);
}

/// For the code `keyspace!` generates: picks [`DocumentVisitor::visit`]
/// for a type with the JSON codec and [`DocumentVisitor::skip`] for one
/// without, by method resolution on `&&Probe<K, D>` (the first candidate,
/// `VisitJson` on `&Probe<K, D>`, exists only where `Json: Codec<D>`).
#[doc(hidden)]
pub struct Probe<K, D>(PhantomData<fn() -> (K, D)>);

impl<K, D> Probe<K, D> {
    #[doc(hidden)]
    pub const fn new() -> Self {
        Probe(PhantomData)
    }
}

impl<K, D> Default for Probe<K, D> {
    fn default() -> Self {
        Self::new()
    }
}

#[doc(hidden)]
pub trait VisitJson<K: Keyspace> {
    fn visit_probe<V: DocumentVisitor<K>>(&self, v: &mut V);
}

impl<K: Keyspace, D: InKeyspace<K> + 'static> VisitJson<K> for &Probe<K, D>
where
    Json: Codec<D>,
{
    fn visit_probe<V: DocumentVisitor<K>>(&self, v: &mut V) {
        v.visit::<D>();
    }
}

#[doc(hidden)]
pub trait VisitOther<K: Keyspace> {
    fn visit_probe<V: DocumentVisitor<K>>(&self, v: &mut V);
}

impl<K: Keyspace, D: Document + 'static> VisitOther<K> for Probe<K, D> {
    fn visit_probe<V: DocumentVisitor<K>>(&self, v: &mut V) {
        v.skip(&D::SPEC);
    }
}
