//! Model-based test of the store's writes: random sequences of create,
//! update, put (`Expect::Any` and `Expect::Version`) and delete on a few
//! ids, from several clients, some of whose writes lose their connection
//! before or after the server ran them. Every reported outcome is checked
//! against an in-memory model of the documents, as it happens; at the end the
//! stored documents equal the model, the change streams hold each applied
//! write exactly once, and `verify` finds nothing.
//!
//! The sequence comes from a seeded generator: `MODEL_SEED=...` replays a
//! run (every failure message names its seed), `MODEL_OPS=...` makes it
//! longer. Operations run one after another; concurrency is the chaos test's
//! business, here the point is every outcome under lost connections.

use microdcs_tests::fixtures::Plant;
use microdcs_tests::seeded::{Rng, env_u64};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use microdcs_tests::fixtures::JobResponse;
use microdcs_tests::{FaultProxy, stream_entries, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Error, Expect, PutOutcome, Store, Stored, Valkey, config::WriteOptions, store::DeleteExpect, store::DeleteOutcome,
    store::MaintenanceOptions,
};

/// A pattern no request contains: arming it disarms a proxy.
const NEVER: &[u8] = b"\x00never\x00";

/// A proxy that loses a request: the connection carrying the armed pattern
/// is closed without forwarding it, so the server never runs it, while the
/// client cannot tell this from a reply lost after the run.
struct DropProxy {
    port: u16,
    armed: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
    drops: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl DropProxy {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let armed: Arc<std::sync::Mutex<Option<Vec<u8>>>> = Arc::default();
        let drops = Arc::new(AtomicU64::new(0));
        let (a, d) = (armed.clone(), drops.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else { continue };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                tokio::spawn(pump(client, server, a.clone(), d.clone()));
            }
        });
        DropProxy { port, armed, drops, task }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn arm(&self, pattern: &[u8]) {
        *self.armed.lock().unwrap() = Some(pattern.to_vec());
    }

    fn disarm(&self) {
        *self.armed.lock().unwrap() = None;
    }

    fn drops(&self) -> u64 {
        self.drops.load(Ordering::SeqCst)
    }
}

impl Drop for DropProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
    drops: Arc<AtomicU64>,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let hit = {
                let mut a = armed.lock().unwrap();
                let hit = a.as_ref().is_some_and(|p| buf[..n].windows(p.len()).any(|w| w.eq_ignore_ascii_case(p)));
                if hit {
                    *a = None;
                }
                hit
            };
            if hit {
                drops.fetch_add(1, Ordering::SeqCst);
                return; // both halves are dropped unforwarded
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        let _ = tokio::io::copy(&mut sr, &mut cw).await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

/// How a client reaches the server.
enum Via {
    Direct,
    /// Through a proxy that forwards the armed write and then drops its reply.
    CutAfter(FaultProxy),
    /// Through a proxy that drops the armed write unforwarded.
    CutBefore(DropProxy),
}

struct Client {
    name: &'static str,
    store: Store<JobResponse>,
    via: Via,
    /// One attempt per write: a cut leaves the outcome unknown, the model
    /// resolves it by reading, and the write is repeated with the same
    /// operation id from another client, which must recognise it.
    one_attempt: bool,
    /// The last read of each id (possibly stale: the source of conflicts).
    reads: BTreeMap<String, Stored<JobResponse>>,
}

impl Client {
    async fn arm(&self) {
        match &self.via {
            Via::Direct => {}
            Via::CutAfter(p) => p.cut_after_request_containing(b"EVALSHA").await,
            Via::CutBefore(p) => p.arm(b"EVALSHA"),
        }
    }

    async fn disarm(&self) {
        match &self.via {
            Via::Direct => {}
            Via::CutAfter(p) => p.cut_after_request_containing(NEVER).await,
            Via::CutBefore(p) => p.disarm(),
        }
    }

    fn cuts(&self) -> u64 {
        match &self.via {
            Via::Direct => 0,
            Via::CutAfter(p) => p.cuts(),
            Via::CutBefore(p) => p.drops(),
        }
    }
}

/// One document as the model holds it.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    version: u64,
    doc: JobResponse,
}

/// The model: the documents, and per id the writes applied, in order, as the
/// change stream must show them (`version`, `change`).
#[derive(Default)]
struct Model {
    docs: BTreeMap<String, Held>,
    log: BTreeMap<String, Vec<(u64, &'static str)>>,
    /// The last version of each deleted document (its tombstone): a
    /// document created again goes on from there.
    tombs: BTreeMap<String, u64>,
}

impl Model {
    fn put(&self, id: &str, expect: Expect) -> PutOutcome {
        match (self.docs.get(id), by_version(expect)) {
            (None, Expect::Create | Expect::Any) => {
                PutOutcome::Written { version: self.tombs.get(id).copied().unwrap_or(0) + 1 }
            }
            (None, Expect::Version(_)) => PutOutcome::NotFound,
            (Some(h), Expect::Create) => PutOutcome::Conflict { current: h.version },
            (Some(h), Expect::Any) => PutOutcome::Written { version: h.version + 1 },
            (Some(h), Expect::Version(n)) if h.version == n => PutOutcome::Written { version: n + 1 },
            (Some(h), Expect::Version(_)) => PutOutcome::Conflict { current: h.version },
            (_, Expect::Revision(_)) => unreachable!("compared by version"),
        }
    }

    fn delete(&self, id: &str, expect: Expect) -> DeleteOutcome {
        match (self.docs.get(id), by_version(expect)) {
            (None, _) => DeleteOutcome::NotFound,
            (Some(h), Expect::Version(n)) if h.version != n => DeleteOutcome::Conflict { current: h.version },
            (Some(h), _) => DeleteOutcome::Deleted { version: h.version },
        }
    }

    fn apply_put(&mut self, doc: &JobResponse, out: PutOutcome) {
        if let PutOutcome::Written { version } = out {
            let existed = self.docs.insert(doc.id.clone(), Held { version, doc: doc.clone() }).is_some();
            let change = if existed { "updated" } else { "created" };
            self.log.entry(doc.id.clone()).or_default().push((version, change));
        }
    }

    fn apply_delete(&mut self, id: &str, out: DeleteOutcome) {
        if let DeleteOutcome::Deleted { version } = out {
            self.docs.remove(id);
            self.tombs.insert(id.to_owned(), version);
            self.log.entry(id.to_owned()).or_default().push((version, "deleted"));
        }
    }
}

/// The expectation as the model compares it: no write is ever lost here,
/// so a revision names its version and nothing else.
fn by_version(expect: Expect) -> Expect {
    match expect {
        Expect::Revision(r) => Expect::Version(r.version()),
        e => e,
    }
}

/// One write, as generated.
#[derive(Debug, Clone)]
enum Op {
    Create(JobResponse),
    Update(Box<Stored<JobResponse>>, JobResponse),
    Put(JobResponse, Expect),
    DeleteRead(Box<Stored<JobResponse>>),
    DeleteId(String, DeleteExpect),
}

impl Op {
    /// The expectation the store checks.
    fn expect(&self) -> Expect {
        match self {
            Op::Create(_) => Expect::Create,
            Op::Update(r, _) | Op::DeleteRead(r) => Expect::Version(r.version),
            Op::Put(_, e) => *e,
            Op::DeleteId(_, DeleteExpect::Version(n)) => Expect::Version(*n),
            Op::DeleteId(_, DeleteExpect::Revision(r)) => Expect::Revision(*r),
            Op::DeleteId(_, DeleteExpect::Any) => Expect::Any,
        }
    }

    fn doc(&self) -> Option<&JobResponse> {
        match self {
            Op::Create(d) | Op::Update(_, d) | Op::Put(d, _) => Some(d),
            Op::DeleteRead(_) | Op::DeleteId(..) => None,
        }
    }
}

/// What a write reported.
#[derive(Debug)]
enum Got {
    Put(PutOutcome),
    Delete(DeleteOutcome),
}

const IDS: [&str; 4] = ["m-0", "m-1", "m-2", "m-3"];
const STATES: [&[&str]; 4] = [&[], &["Running"], &["Held"], &["Running", "Held"]];

fn scope_of(id: &str) -> &'static str {
    if id.ends_with(['0', '2']) { "s1" } else { "s2" }
}

fn random_doc(rng: &mut Rng, id: &str, step: usize) -> JobResponse {
    JobResponse {
        id: id.to_owned(),
        scope: scope_of(id).to_owned(),
        // Each id has its own orders, so no write meets a unique violation,
        // but the unique key moves between two of them.
        job_order_id: format!("o-{id}-{}", rng.below(2)),
        start_time: rng.below(50) as i64,
        state: STATES[rng.below(STATES.len() as u64) as usize].iter().map(|s| (*s).to_owned()).collect(),
        data: format!("step {step}"),
    }
}

async fn connect(url: &str, prefix: &microdcs_valkey::KeyPrefix, attempts: u32) -> Valkey {
    let write = WriteOptions {
        attempts,
        retry_delay: Duration::from_millis(10),
        // Long enough to keep every change of the run for the final check.
        change_stream_max_len: 1_000_000,
        ..WriteOptions::default()
    };
    Valkey::connect_url(url, prefix.clone(), write).await.unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

#[derive(Debug, Default)]
struct Tally {
    outcomes: BTreeMap<String, u64>,
    cuts: u64,
    unknown_applied: u64,
    unknown_not_applied: u64,
}

async fn run(client: &Client, op: &Op, op_id: Option<&str>) -> Result<Got, Error> {
    let s = &client.store;
    Ok(match (op, op_id) {
        (Op::Create(d), None) => Got::Put(s.create(d).await?),
        (Op::Create(d), Some(o)) => Got::Put(s.put(d, Expect::Create).op(o).await?),
        (Op::Update(r, d), None) => Got::Put(s.update(r, d).await?),
        (Op::Update(r, d), Some(o)) => Got::Put(s.update(r, d).op(o).await?),
        (Op::Put(d, e), None) => Got::Put(s.put(d, *e).await?),
        (Op::Put(d, e), Some(o)) => Got::Put(s.put(d, *e).op(o).await?),
        (Op::DeleteRead(r), _) => Got::Delete(s.delete(r).await?),
        (Op::DeleteId(id, e), None) => Got::Delete(s.delete_id(id, *e).await?),
        (Op::DeleteId(id, e), Some(o)) => Got::Delete(s.delete_id(id, *e).op(o).await?),
    })
}

fn outcome_name(g: &Got) -> &'static str {
    match g {
        Got::Put(PutOutcome::Written { .. }) => "written",
        Got::Put(PutOutcome::Conflict { .. }) => "put conflict",
        Got::Put(PutOutcome::NotFound) => "put not found",
        Got::Delete(DeleteOutcome::Deleted { .. }) => "deleted",
        Got::Delete(DeleteOutcome::Conflict { .. }) => "delete conflict",
        Got::Delete(DeleteOutcome::NotFound) => "delete not found",
    }
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    use microdcs_tests::own_server as server;

    #[tokio::test]
    async fn writes_under_lost_connections_match_the_model() {
        let seed = env_u64("MODEL_SEED").unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
        });
        let ops = env_u64("MODEL_OPS").unwrap_or(300) as usize;
        // Printed first: the harness shows it with any failure.
        println!("model: MODEL_SEED={seed} MODEL_OPS={ops}");
        let started = Instant::now();
        let s = server();
        let prefix = unique_prefix("model");
        let mut raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();

        let direct = connect(s.url(), &prefix, 4).await;
        let mut clients = Vec::new();
        for (name, before, one_attempt) in [
            ("cut-after", false, false),
            ("cut-before", true, false),
            ("unknown-after", false, true),
            ("unknown-before", true, true),
        ] {
            let (url, via) = if before {
                let p = DropProxy::start(s.host_port()).await;
                (p.url(), Via::CutBefore(p))
            } else {
                let p = FaultProxy::start(s.host_port()).await;
                (p.url(), Via::CutAfter(p))
            };
            let valkey = connect(&url, &prefix, if one_attempt { 1 } else { 4 }).await;
            clients.push(Client {
                name,
                store: Plant::open(valkey.clone()).store(),
                via,
                one_attempt,
                reads: BTreeMap::new(),
            });
        }
        clients.push(Client {
            name: "direct",
            store: Plant::open(direct.clone()).store(),
            via: Via::Direct,
            one_attempt: false,
            reads: BTreeMap::new(),
        });
        // The reference client: resolves unknown outcomes and repeats them.
        let reference = Plant::open(direct.clone()).store::<JobResponse>();

        let mut rng = Rng::new(seed);
        let mut model = Model::default();
        let mut tally = Tally::default();
        for step in 0..ops {
            let ctx = format!("MODEL_SEED={seed} step {step}");
            let c = rng.below(clients.len() as u64) as usize;
            let id = IDS[rng.below(IDS.len() as u64) as usize];
            // Refresh the client's read of the id most of the time; else use
            // whatever it read last, which may be stale by now.
            if rng.chance(60) || !clients[c].reads.contains_key(id) {
                match clients[c].store.get(id).await {
                    Ok(Some(r)) => {
                        clients[c].reads.insert(id.to_owned(), r);
                    }
                    Ok(None) => {}
                    Err(e) => panic!("{ctx}: get through {}: {e:?}", clients[c].name),
                }
            }
            let read = clients[c].reads.get(id).cloned().map(Box::new);
            let doc = random_doc(&mut rng, id, step);
            let current = model.docs.get(id).map_or(0, |h| h.version);
            let op = match (rng.below(6), read) {
                (0, _) | (1..=2, None) => Op::Create(doc),
                (1, Some(r)) => Op::Update(r, doc),
                (2, Some(r)) => Op::DeleteRead(r),
                (3, _) => Op::Put(doc, Expect::Any),
                // Mostly the stored version, sometimes one off either way.
                (4, _) => Op::Put(doc, Expect::Version((current + rng.below(3)).saturating_sub(1).max(1))),
                _ => Op::DeleteId(
                    id.to_owned(),
                    if rng.chance(50) { DeleteExpect::Any } else { DeleteExpect::Version(current.max(1)) },
                ),
            };
            let armed = !matches!(clients[c].via, Via::Direct) && rng.chance(50);
            let cuts_before = clients[c].cuts();
            if armed {
                clients[c].arm().await;
            }
            let op_id = format!("model-{seed:x}-{step}");
            let result = run(&clients[c], &op, clients[c].one_attempt.then_some(op_id.as_str())).await;
            clients[c].disarm().await;
            let cut = clients[c].cuts() > cuts_before;
            tally.cuts += u64::from(cut);

            let expected = match &op {
                Op::DeleteRead(_) | Op::DeleteId(..) => Got::Delete(model.delete(id, op.expect())),
                _ => Got::Put(model.put(id, op.expect())),
            };
            match result {
                Ok(got) => {
                    *tally.outcomes.entry(outcome_name(&got).to_owned()).or_default() += 1;
                    match (&expected, &got, &op) {
                        (Got::Put(want), Got::Put(got), _) => {
                            assert_eq!(got, want, "{ctx}: {} {op:?}", clients[c].name);
                            model.apply_put(op.doc().expect("a put"), *got);
                        }
                        (Got::Delete(want), Got::Delete(got), _) => {
                            assert_eq!(got, want, "{ctx}: {} {op:?}", clients[c].name);
                            model.apply_delete(id, *got);
                        }
                        _ => unreachable!("a put reports a put outcome, a delete a delete outcome"),
                    }
                }
                Err(e @ Error::UnknownOutcome { .. }) => {
                    assert!(clients[c].one_attempt && cut, "{ctx}: {} gave up without a cut: {e}", clients[c].name);
                    *tally.outcomes.entry("unknown".into()).or_default() += 1;
                    // Resolve it: the stored state is either the model's, or the
                    // model's with this write applied; nothing else.
                    let now = reference.get(id).await.unwrap_or_else(|e| panic!("{ctx}: resolving read: {e}"));
                    let now = now.map(|s| Held { version: s.version, doc: s.doc });
                    let before = model.docs.get(id).cloned();
                    let applied = match (&expected, op.doc()) {
                        (Got::Put(want @ PutOutcome::Written { version }), Some(doc)) => {
                            let after = Some(Held { version: *version, doc: doc.clone() });
                            assert!(
                                now == after || now == before,
                                "{ctx}: {now:?} is neither {before:?} nor {after:?}"
                            );
                            if now == after {
                                model.apply_put(doc, *want);
                            }
                            now == after
                        }
                        (Got::Delete(want @ DeleteOutcome::Deleted { .. }), None) => {
                            assert!(now.is_none() || now == before, "{ctx}: {now:?} is neither gone nor {before:?}");
                            if now.is_none() {
                                model.apply_delete(id, *want);
                            }
                            now.is_none()
                        }
                        _ => {
                            assert_eq!(now, before, "{ctx}: a write the model refuses changed the document");
                            false
                        }
                    };
                    if applied {
                        tally.unknown_applied += 1;
                    } else {
                        tally.unknown_not_applied += 1;
                    }
                    // The same write again, with the same operation id, from a
                    // client whose connection holds: recognised if it was
                    // applied (its version, never a conflict), else judged anew.
                    if let Some(doc) = op.doc() {
                        let again = match &op {
                            Op::Update(r, d) => reference.update(r, d).op(&op_id).await,
                            _ => reference.put(doc, op.expect()).op(&op_id).await,
                        };
                        let again = again.unwrap_or_else(|e| panic!("{ctx}: repeat of {op:?}: {e}"));
                        let want = match expected {
                            Got::Put(w) if applied => w,
                            _ => model.put(id, op.expect()),
                        };
                        assert_eq!(again, want, "{ctx}: repeat of {op:?} (applied: {applied})");
                        if !applied {
                            model.apply_put(doc, again);
                        }
                    } else if let Op::DeleteId(_, expect) = &op {
                        // A delete again with its op id: the tombstone tells an
                        // applied one (its version) from one never run.
                        let again = reference
                            .delete_id(id, *expect)
                            .op(&op_id)
                            .await
                            .unwrap_or_else(|e| panic!("{ctx}: repeat of {op:?}: {e}"));
                        let want = match expected {
                            Got::Delete(w) if applied => w,
                            _ => model.delete(id, op.expect()),
                        };
                        assert_eq!(again, want, "{ctx}: repeat of {op:?} (applied: {applied})");
                        if !applied {
                            model.apply_delete(id, again);
                        }
                    }
                }
                Err(e) => panic!("{ctx}: {} {op:?}: unexpected error {e:?}", clients[c].name),
            }
        }

        // The stored documents are the model's.
        for id in IDS {
            let now = reference.get(id).await.unwrap().map(|s| Held { version: s.version, doc: s.doc });
            assert_eq!(now, model.docs.get(id).cloned(), "MODEL_SEED={seed}: final state of {id}");
        }
        // Each applied write is in the change stream once, in order, and no
        // operation id appears twice.
        let mut streamed: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
        let mut op_ids = BTreeSet::new();
        for scope in ["s1", "s2"] {
            for e in stream_entries(&mut raw, &format!("{}:changes:{scope}", prefix.as_str())).await {
                assert!(op_ids.insert(e["op"].clone()), "MODEL_SEED={seed}: op {} streamed twice", e["op"]);
                streamed.entry(e["id"].clone()).or_default().push((e["v"].parse().unwrap(), e["change"].clone()));
            }
        }
        let logged: BTreeMap<String, Vec<(u64, String)>> = model
            .log
            .iter()
            .map(|(id, l)| (id.clone(), l.iter().map(|(v, c)| (*v, (*c).to_owned())).collect()))
            .collect();
        assert_eq!(streamed, logged, "MODEL_SEED={seed}: change streams against the model's applied writes");
        let report = reference.verify(&MaintenanceOptions::default()).await.unwrap();
        assert!(report.is_clean(), "MODEL_SEED={seed}: indexes after the run: {:#?}", report.differences);
        println!("model: {ops} operations in {:?}: {tally:?}", started.elapsed());
        assert!(tally.cuts > 0 || ops < 20, "MODEL_SEED={seed}: no connection was ever cut: {tally:?}");
    }
}
