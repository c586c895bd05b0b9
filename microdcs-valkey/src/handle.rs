//! A keyspace on a connection: the one way to get a typed store, so every
//! document type in use is one whose keys were checked against the whole
//! keyspace at compile time.

use std::fmt;
use std::marker::PhantomData;

use microdcs_schema::{InKeyspace, Keyspace, KeyspaceSpec};

use crate::client::Valkey;
use crate::codec::{Codec, Json};
use crate::store::Store;

/// Keyspace `K` on a connection, made by the `open` function `keyspace!`
/// generates (`Plant::open(valkey)`). Cheap to clone.
///
/// ```
/// use microdcs_valkey::{Document, keyspace};
///
/// #[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
/// struct Job {
///     id: String,
///     scope: String,
/// }
///
/// keyspace! { Jobs { documents: [Job] } }
///
/// # async fn demo(valkey: microdcs_valkey::Valkey) -> Result<(), microdcs_valkey::Error> {
/// let jobs = Jobs::open(valkey).store::<Job>();
/// jobs.create(&Job { id: "j-1".into(), scope: "s1".into() }).await?;
/// # Ok(()) }
/// ```
///
/// A type that is not listed in the keyspace has no store there:
///
/// ```compile_fail
/// # use microdcs_valkey::{Document, keyspace};
/// # #[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
/// # struct Job { id: String, scope: String }
/// #[derive(Debug, serde::Serialize, serde::Deserialize, Document)]
/// struct Stray { id: String, scope: String }
///
/// keyspace! { Jobs { documents: [Job] } }
///
/// # fn demo(valkey: microdcs_valkey::Valkey) {
/// let strays = Jobs::open(valkey).store::<Stray>(); // error: not a document type of `Jobs`
/// # }
/// ```
pub struct KeyspaceHandle<K> {
    valkey: Valkey,
    _keyspace: PhantomData<fn() -> K>,
}

impl<K> Clone for KeyspaceHandle<K> {
    fn clone(&self) -> Self {
        KeyspaceHandle { valkey: self.valkey.clone(), _keyspace: PhantomData }
    }
}

impl<K: Keyspace> fmt::Debug for KeyspaceHandle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyspaceHandle").field("keyspace", &K::SPEC.name).field("valkey", &self.valkey).finish()
    }
}

impl<K: Keyspace> KeyspaceHandle<K> {
    pub(crate) fn new(valkey: Valkey) -> Self {
        KeyspaceHandle { valkey, _keyspace: PhantomData }
    }

    /// The typed store of `D` with the JSON codec.
    pub fn store<D: InKeyspace<K>>(&self) -> Store<D, Json>
    where
        Json: Codec<D>,
    {
        Store::new(self.valkey.clone(), Json)
    }

    /// The typed store of `D` with a codec of your choice.
    pub fn store_with<D: InKeyspace<K>, C: Codec<D>>(&self, codec: C) -> Store<D, C> {
        Store::new(self.valkey.clone(), codec)
    }

    /// The connection.
    pub fn valkey(&self) -> &Valkey {
        &self.valkey
    }

    /// The keyspace's spec.
    pub fn spec(&self) -> &'static KeyspaceSpec<'static> {
        &K::SPEC
    }
}
