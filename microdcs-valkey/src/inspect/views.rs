//! What the inspector hands out: plain, serialisable views of the stored
//! state (`--json` for tools).

use serde::Serialize;

/// A document type of the keyspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindInfo {
    /// The kind (`jobresponse`).
    pub kind: String,
    /// The Rust type.
    pub type_name: String,
    /// Document key template.
    pub key: String,
    /// Its families: (role, name, Valkey type, template).
    pub families: Vec<FamilyInfo>,
    /// The documents' lifetime in milliseconds, if they have one.
    pub ttl_ms: Option<u64>,
}

/// One key family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FamilyInfo {
    /// `document`, `list`, `unique`, `group` or `declared`.
    pub role: String,
    /// Index or family name.
    pub name: String,
    /// The Valkey type (`hash`, `zset`, ...; `channel` for a channel).
    pub key_type: String,
    /// Key template.
    pub template: String,
}

/// A page of ids and where the next one starts (`None` at the end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InspectorPage {
    /// The ids.
    pub ids: Vec<String>,
    /// Pass back for the next page.
    pub next: Option<u64>,
}

/// What the inspector found of one index entry a document should have.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum EntryState {
    /// In place.
    Present,
    /// Not there.
    Missing,
    /// A unique key held by another id.
    OtherHolder {
        /// The id it holds.
        holder: String,
    },
    /// In a sorted list with another score than the document's.
    OtherScore {
        /// The score the hash keeps.
        expected: String,
        /// The score in the list.
        found: f64,
    },
    /// The document is not in this index.
    NotIndexed,
    /// Its key could not be formed from the stored fields, or the key
    /// holds another type.
    Unreadable {
        /// Why.
        reason: String,
    },
}

/// One index entry of a document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntryView {
    /// `list` or the index name.
    pub index: String,
    /// The key the entry belongs in, when the document is indexed there.
    pub key: Option<String>,
    /// What was found there.
    #[serde(flatten)]
    pub state: EntryState,
}

/// One stored document as it is in the hash.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DocumentView {
    /// The kind.
    pub kind: String,
    /// The id.
    pub id: String,
    /// The hash key.
    pub key: String,
    /// `v` as stored.
    pub version: Option<String>,
    /// `scope` as stored.
    pub scope: Option<String>,
    /// The stored operation ids, oldest first; the last is the newest write's.
    pub ops: Vec<String>,
    /// The hash fields the indexes keep (name, value).
    pub fields: Vec<(String, Option<String>)>,
    /// The document decoded as JSON, when it is JSON.
    pub document: Option<serde_json::Value>,
    /// The stored text, when it is not JSON (or not UTF-8: lossy).
    pub text: Option<String>,
    /// Each index entry the stored fields call for.
    pub entries: Vec<EntryView>,
    /// Remaining lifetime in milliseconds, for a document with one.
    pub ttl_ms: Option<u64>,
}

/// A dedupe claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DedupeView {
    /// The claim's key.
    pub key: String,
    /// `processing:<token>`, `done`, or `None` when unclaimed.
    pub value: Option<String>,
    /// Remaining lifetime in milliseconds.
    pub ttl_ms: Option<u64>,
}

/// A fencing lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseView {
    /// The lease name.
    pub name: String,
    /// The holder, while held.
    pub holder: Option<String>,
    /// The lease id of the current grant.
    pub lease_id: Option<String>,
    /// The token of the current grant.
    pub token: Option<String>,
    /// The highest token ever issued.
    pub fence: Option<String>,
    /// Remaining lifetime in milliseconds, while held.
    pub ttl_ms: Option<u64>,
}

/// One consumer group of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupView {
    /// Group name.
    pub name: String,
    /// Consumers.
    pub consumers: u64,
    /// Entries delivered and not acknowledged.
    pub pending: u64,
    /// Entries not yet delivered to the group (when the server knows).
    pub lag: Option<u64>,
    /// Age in milliseconds of the oldest pending entry (server clock);
    /// `None` with nothing pending, or past the first
    /// [`Inspector::MAX_GROUP_DETAILS`](crate::inspect::Inspector::MAX_GROUP_DETAILS) groups.
    pub oldest_pending_age_ms: Option<u64>,
}

/// A stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StreamView {
    /// The key.
    pub key: String,
    /// Entries.
    pub length: u64,
    /// Its consumer groups.
    pub groups: Vec<GroupView>,
}

/// A value of a string family (a heartbeat, a limit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueView {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Option<String>,
    /// Remaining lifetime in milliseconds.
    pub ttl_ms: Option<u64>,
    /// When the value is a Unix time in milliseconds: how long ago that
    /// was by the server's clock (the time since a heartbeat).
    pub age_ms: Option<i64>,
}
