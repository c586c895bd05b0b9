//! The miroir task store, declared: the 14 tables and 6 extra keys of a
//! search cluster's control-plane store (hand-written over raw Redis
//! commands in miroir's `redis.rs`), as document types and typed families,
//! with a dozen operations of our own over them; not miroir's `TaskStore`
//! trait (the guide's index, where it introduces this program, compares a port
//! of the whole trait).
//!
//! Every table is an unscoped document type (miroir has no tenants in its
//! keys): the hash, its index set, TTLs and the job queue are generated,
//! one script per write, checked by `verify`. The index sets live under
//! `index:<table>` rather than the original `<table>:_index`: beside
//! `<table>:{id}` that key is also the key of the document whose id is
//! `_index`, which the overlap check refuses (one such id would overwrite
//! the index). The other keys are typed
//! families; the leader lease is our fencing [`LeaseStore`] on families
//! this keyspace declares, so the overlap check covers them too.
//!
//! [`LeaseStore`]: microdcs_valkey::lease::LeaseStore

use microdcs_valkey::{Document, keyspace};
use serde::{Deserialize, Serialize};

/// `tasks`: a task, listed in `index:tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "task", key = "tasks:{id}", list(key = "index:tasks"))]
pub struct Task {
    /// Task uid.
    pub id: String,
    /// The index it works on.
    pub index_uid: String,
    /// `enqueued`, `processing`, `succeeded`, `failed`.
    pub status: String,
    /// Task details (JSON).
    pub details: String,
    /// Enqueued at, Unix ms.
    pub enqueued_at: i64,
}

/// `node_settings_version`: the settings version a node has applied for an
/// index; the id is [`NodeSettingsVersion::id_of`] the pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    unscoped,
    kind = "node_settings",
    key = "node_settings_version:{id}",
    list(key = "index:node_settings_version")
)]
pub struct NodeSettingsVersion {
    /// `index.node`.
    pub id: String,
    /// Index uid.
    pub index_uid: String,
    /// Node id.
    pub node: String,
    /// Settings version applied.
    pub version: u64,
}

impl NodeSettingsVersion {
    /// The id of an (index, node) pair.
    pub fn id_of(index_uid: &str, node: &str) -> String {
        format!("{index_uid}.{node}")
    }
}

/// `aliases`: an alias and the indexes it points at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "alias", key = "aliases:{id}", list(key = "index:aliases"))]
pub struct Alias {
    /// Alias name.
    pub id: String,
    /// Target indexes.
    pub indexes: Vec<String>,
}

/// `sessions`: a session pinned to a node, expiring on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "session", key = "session:{id}", ttl = "30m", changes = none)]
pub struct Session {
    /// Session id.
    pub id: String,
    /// The node it is pinned to.
    pub node: String,
}

/// `idempotency_cache`: the stored response of a request key, expiring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "idemp", key = "idemp:{id}", ttl = "24h", changes = none)]
pub struct Idempotency {
    /// The request's idempotency key.
    pub id: String,
    /// Response status.
    pub status: u16,
    /// Response body.
    pub body: String,
}

/// `jobs`: a background job; queued jobs are in `queue:jobs`, taken by
/// [`microdcs_valkey::Store::claim`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "job", key = "jobs:{id}", member(key = "queue:jobs", when = is_queued(), name = "queued"))]
pub struct Job {
    /// Job id.
    pub id: String,
    /// What to do.
    pub kind: String,
    /// `queued`, `running`, `done`.
    pub state: String,
    /// The worker that took it.
    #[serde(default)]
    pub worker: Option<String>,
}

impl Job {
    /// Whether the job waits for a worker.
    pub fn is_queued(&self) -> bool {
        self.state == "queued"
    }
}

/// `canaries`: a canary query, listed in `index:canary`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "canary", key = "canary:{id}", list(key = "index:canary"))]
pub struct Canary {
    /// Canary id.
    pub id: String,
    /// Index uid.
    pub index_uid: String,
    /// The query it runs.
    pub query: String,
}

/// `rollover_policies`: a rollover policy, listed in `index:rollover`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "rollover", key = "rollover:{id}", list(key = "index:rollover"))]
pub struct RolloverPolicy {
    /// Policy name.
    pub id: String,
    /// Roll over after this many documents.
    pub max_docs: u64,
}

/// `search_ui_config`: the search UI configuration of an index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "search_ui", key = "search_ui_config:{id}")]
pub struct SearchUiConfig {
    /// Index uid.
    pub id: String,
    /// Configuration (JSON).
    pub config: String,
}

/// `admin_sessions`: an admin login, expiring; revoked ones are announced
/// on `admin_session:revoked`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(unscoped, kind = "admin_session", key = "admin_session:{id}", ttl = "8h", changes = none)]
pub struct AdminSession {
    /// Session id.
    pub id: String,
    /// The admin user.
    pub user: String,
    /// Revoked (logged out).
    pub revoked: bool,
}

keyspace! {
    /// The miroir task store: 14 tables and 6 extra keys.
    pub Miroir {
        documents: [
            Task, NodeSettingsVersion, Alias, Session, Idempotency, Job, Canary, RolloverPolicy,
            SearchUiConfig, AdminSession,
        ],
        // `leader_lease`: our fencing lease, on families the overlap check covers.
        leader_lease: hash("lease:{#name}"),
        leader_lease_fence: string("lease:{#name}:fence"),
        leader_lease_request: hash("lease:{#name}:req:{request}"),
        leader_lease_data: string("lease:{#name}:data"),
        // `canary_runs`: the latest runs of a canary, bounded.
        canary_runs: zset("canary_runs:{canary}"),
        // `cdc_cursors`: a sink's cursor per index, and the pairs that have one.
        cdc_cursor: string("cdc_cursor:{sink}:{index}"),
        cdc_cursors: set("index:cdc_cursor"),
        // `tenant_map`: tenant settings by the SHA-256 of the tenant key.
        tenant_map: hash("tenant_map:{hash}"),
        // Extra keys.
        scoped_key: hash("search_ui_scoped_key:{index}"),
        scoped_key_observed: hash("search_ui_scoped_key_observed:{pod}:{index}", ttl = "60s"),
        revoked: channel("admin_session:revoked"),
        searchui_rate: rate_limit("ratelimit:searchui:{ip}"),
        adminlogin_rate: rate_limit("ratelimit:adminlogin:{ip}"),
        cdc_overflow: list("cdc:overflow:{sink}"),
    }
}

/// The lease families of [`Miroir`], for [`microdcs_valkey::lease::LeaseStore::with_families`].
pub fn lease_families() -> microdcs_valkey::lease::LeaseFamilies {
    let family = |name: &str| *Miroir::SPEC.declared(name).unwrap_or_else(|| panic!("the keyspace declares `{name}`"));
    microdcs_valkey::lease::LeaseFamilies {
        record: family("leader_lease"),
        fence: family("leader_lease_fence"),
        request: family("leader_lease_request"),
        data: family("leader_lease_data"),
    }
}

/// Operations of a task store over [`Miroir`], each a call of a generated
/// script or typed family: a selection of what the hand-written store does
/// command by command, not its trait.
#[derive(Clone)]
pub struct TaskStore {
    valkey: microdcs_valkey::Valkey,
    ks: microdcs_valkey::KeyspaceHandle<Miroir>,
    leases: std::sync::Arc<microdcs_valkey::lease::LeaseStore>,
    // The stores its operations use, made once: a store derives its
    // scripts and templates when it is made.
    tasks: microdcs_valkey::Store<Task>,
    jobs: microdcs_valkey::Store<Job>,
    sessions: microdcs_valkey::Store<Session>,
    // Many tiny entries: stored by position (see `CompactJson`); the
    // type's fields only ever grow at the end.
    idempotency: microdcs_valkey::Store<Idempotency, microdcs_valkey::store::CompactJson>,
    admins: microdcs_valkey::Store<AdminSession>,
}

/// How many runs of one canary are kept.
pub const CANARY_RUNS_KEPT: u64 = 100;

/// The bytes of overflowed CDC events one sink keeps (the newest).
pub const CDC_OVERFLOW_BUDGET: u64 = 1 << 20;

type Res<T> = microdcs_valkey::Result<T>;

impl TaskStore {
    /// The store on `valkey`.
    ///
    /// # Errors
    /// The lease families refused (they are declared above, so never).
    pub fn new(valkey: microdcs_valkey::Valkey) -> Res<Self> {
        let leases = microdcs_valkey::lease::LeaseStore::new(valkey.clone()).with_families(lease_families())?;
        let ks = Miroir::open(valkey.clone());
        Ok(TaskStore {
            tasks: ks.store(),
            jobs: ks.store(),
            sessions: ks.store(),
            idempotency: ks.store_with(microdcs_valkey::store::CompactJson),
            admins: ks.store(),
            ks,
            valkey,
            leases: std::sync::Arc::new(leases),
        })
    }

    /// The typed store of one table (made on each call: keep it).
    pub fn table<D>(&self) -> microdcs_valkey::Store<D>
    where
        D: microdcs_valkey::schema::InKeyspace<Miroir> + Serialize + serde::de::DeserializeOwned,
    {
        self.ks.store::<D>()
    }

    /// The idempotency entries' store: fields stored by position
    /// ([`microdcs_valkey::store::CompactJson`]), which keeps these many tiny
    /// hashes in the server's compact encoding.
    pub fn idempotency(&self) -> &microdcs_valkey::Store<Idempotency, microdcs_valkey::store::CompactJson> {
        &self.idempotency
    }

    /// Inserts a task with its index entry (one script).
    ///
    /// # Errors
    /// As [`microdcs_valkey::Store::create`].
    pub async fn insert_task(&self, task: &Task) -> Res<microdcs_valkey::PutOutcome> {
        self.tasks.create(task).await
    }

    /// A page of task ids, from the index set.
    ///
    /// # Errors
    /// As [`microdcs_valkey::Store::list_all`].
    pub async fn list_tasks(&self, page: microdcs_valkey::Page) -> Res<microdcs_valkey::store::IdPage> {
        self.tasks.list_all(page).await
    }

    /// Enqueues a job.
    ///
    /// # Errors
    /// As [`microdcs_valkey::Store::create`].
    pub async fn enqueue_job(&self, id: &str, kind: &str) -> Res<microdcs_valkey::PutOutcome> {
        let job = Job { id: id.into(), kind: kind.into(), state: "queued".into(), worker: None };
        self.jobs.create(&job).await
    }

    /// Takes one queued job for `worker`: queued -> running, atomically,
    /// each job to exactly one worker.
    ///
    /// # Errors
    /// As [`microdcs_valkey::Store::claim`].
    pub async fn claim_job(&self, worker: &str) -> Res<Option<Job>> {
        let claimed = self
            .jobs
            .claim(Job::queued(), |j| {
                j.is_queued().then(|| Job { state: "running".into(), worker: Some(worker.into()), ..j.clone() })
            })
            .await?;
        Ok(claimed.map(|s| s.doc))
    }

    /// Tries to become the leader of `scope` for `ttl` (a fencing lease).
    ///
    /// # Errors
    /// As [`microdcs_valkey::lease::LeaseBackend::acquire`].
    pub async fn acquire_leader(
        &self,
        scope: &str,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Res<microdcs_valkey::lease::Acquire> {
        use microdcs_valkey::lease::LeaseBackend as _;
        self.leases.acquire(scope, owner, ttl, &microdcs_valkey::store::new_op_id()).await
    }

    /// Pins a session to a node (expires after the type's 30 min, or `ttl`).
    ///
    /// # Errors
    /// As [`microdcs_valkey::Store::put`].
    pub async fn pin_session(&self, id: &str, node: &str, ttl: Option<std::time::Duration>) -> Res<()> {
        let store = self.sessions.clone();
        let store = match ttl {
            Some(t) => store.with_ttl(t)?,
            None => store,
        };
        let _ = store.put(&Session { id: id.into(), node: node.into() }, microdcs_valkey::Expect::Any).await?;
        Ok(())
    }

    /// Stores a response under its idempotency key, unless one is stored:
    /// `false` when the key was taken.
    ///
    /// # Errors
    /// As [`microdcs_valkey::Store::create`].
    pub async fn remember(&self, key: &str, status: u16, body: &str) -> Res<bool> {
        let entry = Idempotency { id: key.into(), status, body: body.into() };
        let out = self.idempotency.create(&entry).await?;
        Ok(matches!(out, microdcs_valkey::PutOutcome::Written { .. }))
    }

    /// Records a canary run, keeping the latest [`CANARY_RUNS_KEPT`].
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn record_canary_run(&self, canary: &str, run: &str, at_ms: i64) -> Res<()> {
        let runs = Miroir::canary_runs(&self.ks, canary)?;
        let _ = runs.add_bounded(run, at_ms as f64, CANARY_RUNS_KEPT).await?;
        Ok(())
    }

    /// Sets a sink's CDC cursor for an index, and lists the pair.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn set_cdc_cursor(&self, sink: &str, index: &str, cursor: &str) -> Res<()> {
        Miroir::cdc_cursor(&self.ks, sink, index)?.set(cursor, None).await?;
        let _ = Miroir::cdc_cursors(&self.ks)?.add(&[format!("{sink}/{index}")]).await?;
        Ok(())
    }

    /// Buffers a CDC event a sink could not take, keeping the newest
    /// [`CDC_OVERFLOW_BUDGET`] bytes; how many old events it evicted.
    ///
    /// # Errors
    /// An event larger than the budget, connection errors, a key of
    /// another type.
    pub async fn overflow(&self, sink: &str, event: &str) -> Res<u64> {
        Miroir::cdc_overflow(&self.ks, sink)?.push_bounded_bytes(event, CDC_OVERFLOW_BUDGET).await
    }

    /// Records that pod `pod` saw the scoped key of `index`: the family's
    /// 60 s lifetime starts again with every observation.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn observe_scoped_key(&self, pod: &str, index: &str, key_id: &str) -> Res<()> {
        let _ = Miroir::scoped_key_observed(&self.ks, pod, index)?.set("key_id", key_id).await?;
        Ok(())
    }

    /// Revokes an admin session: marks it, then tells every pod.
    ///
    /// # Errors
    /// As [`microdcs_valkey::Store::update`]; publishing errors.
    pub async fn revoke_admin_session(&self, id: &str) -> Res<bool> {
        let store = &self.admins;
        let Some(read) = store.get(id).await? else { return Ok(false) };
        let revoked = AdminSession { revoked: true, ..read.doc.clone() };
        let _ = store.update(&read, &revoked).await?;
        let _ = Miroir::revoked(&self.ks)?.publish(id).await?;
        Ok(true)
    }

    /// An admin login attempt from `ip`: allowed unless in a backoff after
    /// failures, or over 10 attempts a minute.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn admin_login_allowed(&self, ip: &str) -> Res<bool> {
        let limit = Miroir::adminlogin_rate(&self.ks, ip)?;
        let decision = limit.attempt(10, std::time::Duration::from_secs(60)).await?;
        Ok(matches!(decision, microdcs_valkey::families::RateDecision::Allowed { .. }))
    }

    /// A failed admin login from `ip`: the backoff doubles from 1 s, to 5 min.
    ///
    /// # Errors
    /// Connection errors, a key of another type.
    pub async fn admin_login_failed(&self, ip: &str) -> Res<std::time::Duration> {
        let limit = Miroir::adminlogin_rate(&self.ks, ip)?;
        limit.fail(std::time::Duration::from_secs(1), std::time::Duration::from_secs(300)).await
    }

    /// The connection.
    pub fn valkey(&self) -> &microdcs_valkey::Valkey {
        &self.valkey
    }
}
