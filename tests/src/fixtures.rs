//! Document types shared by the integration tests, the benches and the demo:
//! the plant keyspace's job response (sorted-set list, unique by-order index,
//! group by-state index) and work master (plain-set list). One declaration,
//! so a test and the demo can never drift apart. Beside them, the `Extras`
//! keyspace: shapes the plant does not use (documents with a lifetime, one
//! without change entries).

pub use microdcs_examples::plant::{JobOrder, JobResponse, Plant, SfcState, WorkMaster};

/// The plant keyspace on a connection.
pub type PlantHandle = microdcs_valkey::KeyspaceHandle<Plant>;

use microdcs_valkey::Document;
use serde::{Deserialize, Serialize};

/// A login session: found by its token, gone 30 minutes after its last
/// write (a document with a lifetime and a unique index that expires with it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "session", ttl = "30m", unique(key = "session:bytoken:{token}"))]
pub struct Session {
    /// Session id.
    pub id: String,
    /// Tenant.
    pub scope: String,
    /// Bearer token.
    pub token: String,
    /// Who logged in.
    pub user: String,
}

/// A stored answer to a request, kept an hour for retries: nobody consumes
/// its changes, so its writes append none and publish no nudge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "idem", changes = none, ttl = "1h")]
pub struct Idempotency {
    /// The request's idempotency key.
    pub id: String,
    /// Tenant.
    pub scope: String,
    /// The answer given.
    pub response: String,
}

/// A queued job: listed by creation time, grouped by status, in the
/// `running` set exactly while it runs (a conditional group), in `due` by
/// its deadline while it has one, and in `recent` while among the three
/// newest (a bounded sorted index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "job",
    list(key = "job:list:{scope}", score = created),
    group(key = "job:bystatus:{scope}:{status}"),
    member(key = "job:running:{scope}", when = is_running(), name = "running"),
    sorted(key = "job:due:{scope}", score = due, name = "due"),
    sorted(key = "job:recent:{scope}", score = created, max = 3, name = "recent"),
)]
pub struct Job {
    /// Job id.
    pub id: String,
    /// Tenant.
    pub scope: String,
    /// `queued`, `running`, `done`.
    pub status: String,
    /// Creation time, Unix ms.
    pub created: i64,
    /// When it is due next, Unix ms (`None`: not scheduled).
    pub due: Option<i64>,
}

impl Job {
    /// Whether the job runs now.
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }
}

/// A ticket, its id unique per scope only: two tenants may both have a
/// `t-1`. Every index names the scope, so each entry names its document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "ticket",
    key = "ticket:{scope}:{id}",
    list(key = "tickets:{scope}", score = opened),
    unique(key = "ticket_ref:{scope}:{reference}"),
    group(key = "ticket_status:{scope}:{status}"),
)]
pub struct Ticket {
    /// Ticket id, unique within its scope.
    pub id: String,
    /// The tenant.
    pub scope: String,
    /// The tenant's own reference.
    pub reference: String,
    /// `open`, `closed`.
    pub status: String,
    /// Opened at, Unix ms.
    pub opened: i64,
}

/// An article, in one set per tag: a multi-valued index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "article", each(key = "article:bytag:{scope}:{tag}", tag = tags, name = "by_tag"))]
pub struct Article {
    /// Article id.
    pub id: String,
    /// The tenant.
    pub scope: String,
    /// Its title.
    pub title: String,
    /// Its tags: the article is in the set of each.
    pub tags: Vec<String>,
}

microdcs_valkey::keyspace! {
    /// Document shapes beside the plant keyspace.
    pub Extras {
        documents: [Session, Idempotency, Job, Ticket, Article],
        // Families the plant does not use.
        overflow: list("cdc:overflow:{scope}"),
        canary_runs: zset("canary:runs:{scope}:{kind}"),
        logins: rate_limit("rl:login:{scope}:{who}"),
        revocations: channel("revoke:{scope}"),
        // Typed fields, values and messages.
        tallies: hash<String, u64>("tally:{scope}"),
        ticks: channel<u64>("tick:{scope}"),
        // Families with a declared lifetime: every write gives it again.
        seen: set("seen:{scope}", ttl = "30s"),
        recent: zset("recent:{scope}", ttl = "30s"),
        trail: list("trail:{scope}", ttl = "30s"),
        hits: counter("hits:{scope}", ttl = "30s"),
        note: value<u32>("note:{scope}", ttl = "30s"),
        observed: hash("observed:{scope}", ttl = "30s"),
    }
}
