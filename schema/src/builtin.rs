//! The key families the runtime's own services use, as constants: the
//! shared families every document type writes by default (change stream,
//! nudge channel, scope registry, tombstones), the dedupe and start-lock keys, the lease
//! keys and the index-layout fingerprints.
//!
//! Services take their keys from these specs, never from a family looked up
//! by name. Declare the ones your application uses in its keyspace with the
//! same template (the plant example does) so the compile-time overlap check
//! covers them.

use crate::family::{FamilyKind, FamilySpec, KeyType};

/// The change stream of a scope (`changes:{scope}`), the default of every
/// document type's `changes`.
pub const CHANGES: FamilySpec<'static> = FamilySpec {
    name: "changes",
    key: "changes:{scope}",
    key_type: KeyType::Stream,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The nudge channel of a kind (`nudge:{kind}`), the default of every
/// document type's `nudge`.
pub const NUDGE: FamilySpec<'static> = FamilySpec {
    name: "nudge",
    key: "nudge:{kind}",
    key_type: KeyType::Channel,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The nudge channel of a kind, one per scope (`nudge:{kind}:{#scope}`),
/// for a sharded type that opts in with `nudge = "nudge:{kind}:{#scope}"`:
/// its writes send the nudge with `SPUBLISH` on the channel of the
/// document's scope, which stays on the scope's primary (and its replicas)
/// instead of crossing the whole cluster bus as a `PUBLISH` does.
pub const SHARDED_NUDGE: FamilySpec<'static> = FamilySpec {
    name: "nudge",
    key: "nudge:{kind}:{#scope}",
    key_type: KeyType::Channel,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The scope registry (`scopes`), the default of every document type's
/// `registry`.
pub const SCOPES: FamilySpec<'static> =
    FamilySpec { name: "scopes", key: "scopes", key_type: KeyType::Set, kind: FamilyKind::Builtin, ttl_ms: None };

/// The tombstone a delete leaves (`tomb:{kind}:{id}`): the document's last
/// version, the delete's operation id and the document's operation history,
/// kept for `TombstoneRetention`. A retried delete and a retried write of a
/// document deleted in between find their operation id here, so neither is
/// applied twice nor misreported after a lost reply.
pub const TOMBSTONES: FamilySpec<'static> = FamilySpec {
    name: "tombstones",
    key: "tomb:{kind}:{id}",
    key_type: KeyType::String,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The change stream of a scope in a sharded type (`changes:{#scope}`):
/// the default `changes` of a type whose document key holds `{#scope}`, so
/// the change entry lives in the slot of the document it describes.
pub const SHARDED_CHANGES: FamilySpec<'static> = FamilySpec {
    name: "changes",
    key: "changes:{#scope}",
    key_type: KeyType::Stream,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The tombstone a delete of a sharded type leaves
/// (`tomb:{kind}:{#scope}:{id}`): as [`TOMBSTONES`], in the slot of the
/// document's scope.
pub const SHARDED_TOMBSTONES: FamilySpec<'static> = FamilySpec {
    name: "tombstones",
    key: "tomb:{kind}:{#scope}:{id}",
    key_type: KeyType::String,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// A dedupe claim: `{hash}` is a digest of the event's source and id.
pub const DEDUPE: FamilySpec<'static> = FamilySpec {
    name: "dedupe",
    key: "ce:dedupe:{hash}",
    key_type: KeyType::String,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The start lease of one configuration.
pub const START_LOCK: FamilySpec<'static> = FamilySpec {
    name: "start_lock",
    key: "lock:poststart:{config_id}",
    key_type: KeyType::String,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// A fencing lease record (hash tag: all keys of one lease share a slot).
pub const LEASE: FamilySpec<'static> = FamilySpec {
    name: "lease",
    key: "lease:{#name}",
    key_type: KeyType::Hash,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The fence counter of a lease (never expires).
pub const LEASE_FENCE: FamilySpec<'static> = FamilySpec {
    name: "lease_fence",
    key: "lease:{#name}:fence",
    key_type: KeyType::String,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The cached result of one lease request id.
pub const LEASE_REQUEST: FamilySpec<'static> = FamilySpec {
    name: "lease_request",
    key: "lease:{#name}:req:{request}",
    key_type: KeyType::Hash,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The value a lease protects (written only with the current fence).
pub const LEASE_DATA: FamilySpec<'static> = FamilySpec {
    name: "lease_data",
    key: "lease:{#name}:data",
    key_type: KeyType::String,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// Index-layout fingerprints of the document types (verify and rebuild).
pub const FINGERPRINTS: FamilySpec<'static> = FamilySpec {
    name: "fingerprints",
    key: "schema:fingerprints",
    key_type: KeyType::Hash,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The registry of live writers of a kind (`schema:writers:{#kind}`): a
/// sorted set of `<schema>:<writer id>`, each scored by the server time (in
/// milliseconds) its entry expires at, renewed by every store that writes
/// (`WriterHeartbeat`, `WriterLifetime`). Tagged by the kind, so it shares a
/// slot with the kind's index states and one script updates both.
pub const WRITERS: FamilySpec<'static> = FamilySpec {
    name: "writers",
    key: "schema:writers:{#kind}",
    key_type: KeyType::SortedSet,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// A member of [`WRITERS`]: `<schema>:<writer id>`. The writers script
/// reads the schema back from before the first `:`.
pub fn writer_member(schema: u32, writer: &str) -> String {
    format!("{schema}:{writer}")
}

/// The state of each index of a kind (`schema:indexes:{#kind}`): a hash
/// from index name to `building:<schema>:<fingerprint>` or
/// `ready:<schema>:<fingerprint>`, and the bookkeeping of backfills: the
/// cursor of one in progress, and how often the writers of each schema
/// announced themselves (fields starting with `@`, which no index name
/// does).
pub const INDEX_STATES: FamilySpec<'static> = FamilySpec {
    name: "index_states",
    key: "schema:indexes:{#kind}",
    key_type: KeyType::Hash,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// The key a cluster connection reads (never writes) after a time-out,
/// so that a primary which no longer serves its slot answers `MOVED` and
/// the cluster client learns the new slot map.
pub const CLUSTER_PROBE: FamilySpec<'static> = FamilySpec {
    name: "cluster_probe",
    key: "cluster-probe",
    key_type: KeyType::String,
    kind: FamilyKind::Builtin,
    ttl_ms: None,
};

/// Every family above.
pub const ALL: [FamilySpec<'static>; 14] = [
    CHANGES,
    NUDGE,
    SCOPES,
    TOMBSTONES,
    DEDUPE,
    START_LOCK,
    LEASE,
    LEASE_FENCE,
    LEASE_REQUEST,
    LEASE_DATA,
    FINGERPRINTS,
    CLUSTER_PROBE,
    WRITERS,
    INDEX_STATES,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::KeyTemplate;

    #[test]
    fn builtins_are_valid_and_disjoint() {
        for f in ALL {
            assert!(KeyTemplate::parse(f.key).is_ok(), "{}", f.name);
        }
        for (i, a) in ALL.iter().enumerate() {
            for b in &ALL[i + 1..] {
                let channels = (a.key_type == KeyType::Channel) == (b.key_type == KeyType::Channel);
                assert!(!(channels && crate::templates_overlap(a.key, b.key)), "{} and {}", a.name, b.name);
            }
        }
    }
}
