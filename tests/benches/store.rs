//! Store benchmark: prints a table, asserts nothing about time.
//!
//! `cargo bench -p microdcs-tests --bench store` (starts its own valkey-server).
//! Compares the typed store with (a) the raw EVALSHA of the same generated
//! script through `redis` and (b) a hand-written WATCH/MULTI/EXEC
//! read-modify-write of the same layout, all in the same run.
//!
//! `-- --cost` prints only the cost per document instead: bytes per stored
//! document beside a plain hash with the same index keys, and server time
//! per put beside a minimal Lua CAS doing the same writes, the put script
//! before the op history change (`put-before.lua`) and the put script
//! before the server time work (`put-before-cost.lua`), all measured in the
//! same run, and beside the put with one part removed at a time (the op
//! history, the version grammar, the scope and doc checks, the caller-read
//! checks). `--docs N` sets the number of documents (default 10000).
//! `-- --network` only the throughput at 0.5, 1 and 2 ms each way
//! against ideal pipelining and WATCH; `-- --each` the server time of an
//! update with a multi-valued index by how many values change.
//! `-- --server-time` prints only the server time; `-- --batch` the
//! many-at-a-time figures (`put_many`, `get_many`, `claim`); `-- --step`
//! the workflow step (`Store::step` of the SFC state with one work entry)
//! beside a raw `EVALSHA` of the same generated script, and the server time
//! per step beside a put of the same document. Both pin the server to
//! the first core and the bench to the second (`taskset`), and report the
//! server's `INFO commandstats` time and its main-thread CPU time.
//! `-- --read-back` what the check that a stored text reads back costs,
//! beside a put with each JSON codec.
//!
//! Long on purpose: every benchmark prints its ratio against a baseline
//! measured in the same run, so baselines and measures share one file.

use microdcs_tests::fixtures::Plant;
use std::time::{Duration, Instant};

use microdcs_tests::{FaultProxy, ValkeyServer, command_calls, command_usec, unique_prefix, used_memory};
use microdcs_valkey::client::Connection;
use microdcs_valkey::redis::{self, Script, aio::ConnectionManager};
use microdcs_valkey::{Document, PutOutcome, Store, Valkey, config::WriteOptions};

use microdcs_tests::fixtures::JobResponse;

fn doc(i: usize, step: u64) -> JobResponse {
    JobResponse {
        id: format!("r-{i}"),
        scope: "s1".into(),
        job_order_id: format!("o-{i}"),
        // A response's start time does not change; its state does.
        start_time: 1_700_000_000_000 + i as i64,
        state: vec![if step.is_multiple_of(2) { "Running".into() } else { "Held".into() }],
        data: "x".repeat(200),
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A minimal compare-and-set doing the same writes as the generated put
/// (same KEYS and ARGV): no corruption, scope, read or type checks and no op
/// history. The floor for server time per write.
const MINIMAL_CAS: &str = r"
local cur = redis.call('HMGET', KEYS[1], 'v', 'state', 'score')
local v = tonumber(cur[1] or '0')
if ARGV[1] ~= 'any' and ARGV[1] ~= 'create' and tonumber(ARGV[1]) ~= v then return {0, v} end
local newv = v + 1
local change = 'updated'
if v == 0 then change = 'created' end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[8], '*', 'id', ARGV[3], 'v', newv, 'op', ARGV[2], 'change', change, 'kind', ARGV[6])
if cur[2] ~= ARGV[15] then
  if cur[2] then redis.call('SREM', KEYS[8], ARGV[3]) end
  redis.call('SADD', KEYS[7], ARGV[3])
end
if v == 0 then redis.call('SET', KEYS[5], ARGV[3]) end
if cur[3] ~= ARGV[9] then redis.call('ZADD', KEYS[4], ARGV[9], ARGV[3]) end
redis.call('HSET', KEYS[1], 'v', newv, 'scope', ARGV[4], 'doc', ARGV[5], 'score', ARGV[9], 'order', ARGV[11], 'state', ARGV[15])
if v == 0 then redis.call('SADD', KEYS[3], ARGV[4]) end
redis.call('PUBLISH', ARGV[7], ARGV[4])
return {1, newv}
";

/// The raw baseline: the same generated script, keys and arguments built by
/// hand once, only the op id and version varying.
struct Raw {
    script: Script,
    con: Connection,
    prefix: String,
}

impl Raw {
    async fn put(&mut self, i: usize, step: u64) {
        let d = doc(i, step);
        let text = serde_json::to_string(&d).unwrap();
        let p = &self.prefix;
        let state = d.normalized_state();
        let prev = if step.is_multiple_of(2) { "Held" } else { "Running" };
        let old_present = if step == 0 { "0" } else { "1" };
        let op = microdcs_valkey::store::new_op_id();
        let _: redis::Value = self
            .script
            .key(format!("{p}:jobresponse:r-{i}"))
            .key(format!("{p}:changes:s1"))
            .key(format!("{p}:scopes"))
            .key(format!("{p}:jobresponse:list:s1"))
            .key(format!("{p}:jobresponse:byorder:o-{i}"))
            .key(format!("{p}:jobresponse:byorder:o-{i}"))
            .key(format!("{p}:jobresponse:bystate:s1:{state}"))
            .key(format!("{p}:jobresponse:bystate:s1:{prev}"))
            .key(format!("{p}:tomb:jobresponse:r-{i}"))
            .arg("any")
            .arg(&op)
            .arg(format!("r-{i}"))
            .arg("s1")
            .arg(&text)
            .arg("jobresponse")
            .arg(format!("{p}:nudge:jobresponse"))
            .arg("5000")
            .arg(d.start_time.to_string())
            .arg("1")
            .arg(format!("o-{i}"))
            .arg(old_present)
            .arg(format!("o-{i}"))
            .arg("1")
            .arg(&state)
            .arg(old_present)
            .arg(prev)
            .arg(WriteOptions::default().op_history.to_string())
            .invoke_async(&mut self.con)
            .await
            .unwrap();
    }
}

/// The hand-written WATCH/MULTI/EXEC read-modify-write of the same layout.
async fn watch_put(con: &mut redis::aio::MultiplexedConnection, prefix: &str, i: usize, step: u64) -> bool {
    let key = format!("{prefix}:jobresponse:r-{i}");
    let _: () = redis::cmd("WATCH").arg(&key).query_async(con).await.unwrap();
    let (v, old_state): (Option<u64>, Option<String>) =
        redis::cmd("HMGET").arg(&key).arg("v").arg("state").query_async(con).await.unwrap();
    let d = doc(i, step);
    let text = serde_json::to_string(&d).unwrap();
    let state = d.normalized_state();
    let newv = v.unwrap_or(0) + 1;
    let mut pipe = redis::pipe();
    pipe.atomic()
        .hset_multiple(
            &key,
            &[
                ("v", newv.to_string()),
                ("scope", "s1".into()),
                ("doc", text),
                ("state", state.clone()),
                ("order", format!("o-{i}")),
            ],
        )
        .ignore();
    if let Some(old) = old_state {
        pipe.srem(format!("{prefix}:jobresponse:bystate:s1:{old}"), format!("r-{i}")).ignore();
    }
    pipe.sadd(format!("{prefix}:jobresponse:bystate:s1:{state}"), format!("r-{i}"))
        .ignore()
        .set(format!("{prefix}:jobresponse:byorder:o-{i}"), format!("r-{i}"))
        .ignore()
        .zadd(format!("{prefix}:jobresponse:list:s1"), format!("r-{i}"), d.start_time)
        .ignore()
        .cmd("XADD")
        .arg(format!("{prefix}:changes:s1"))
        .arg("MAXLEN")
        .arg("~")
        .arg(5000)
        .arg("*")
        .arg("id")
        .arg(format!("r-{i}"))
        .arg("v")
        .arg(newv)
        .ignore()
        .sadd(format!("{prefix}:scopes"), "s1")
        .ignore()
        .publish(format!("{prefix}:nudge:jobresponse"), "s1")
        .ignore();
    let r: Option<()> = pipe.query_async(con).await.unwrap();
    r.is_some()
}

async fn store_throughput(store: &Store<JobResponse>, callers: usize, per_caller: usize, base: usize) -> f64 {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..callers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let i = base + c;
            assert!(matches!(store.create(&doc(i, 0)).await.unwrap(), PutOutcome::Written { .. }));
            let mut read = store.get(&format!("r-{i}")).await.unwrap().unwrap();
            for step in 1..per_caller as u64 {
                let out = store.update_in_place(&mut read, doc(i, step)).await.unwrap();
                assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (callers * per_caller) as f64 / start.elapsed().as_secs_f64()
}

async fn raw_throughput(
    script: &Script,
    con: &Connection,
    prefix: &str,
    callers: usize,
    per_caller: usize,
    base: usize,
) -> f64 {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..callers {
        let mut r = Raw { script: script.clone(), con: con.clone(), prefix: prefix.to_owned() };
        tasks.push(tokio::spawn(async move {
            for step in 0..per_caller as u64 {
                r.put(base + c, step).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (callers * per_caller) as f64 / start.elapsed().as_secs_f64()
}

async fn watch_throughput(url: &str, prefix: &str, callers: usize, per_caller: usize, base: usize) -> (f64, u64) {
    let client = network::client(url);
    let mut cons = Vec::new();
    for _ in 0..callers {
        // WATCH is per connection: one connection per writer.
        cons.push(client.get_multiplexed_async_connection().await.unwrap());
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (c, mut con) in cons.into_iter().enumerate() {
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut aborted = 0;
            for step in 0..per_caller as u64 {
                while !watch_put(&mut con, &prefix, base + c, step).await {
                    aborted += 1;
                }
            }
            aborted
        }));
    }
    let mut aborted = 0;
    for t in tasks {
        aborted += t.await.unwrap();
    }
    ((callers * per_caller) as f64 / start.elapsed().as_secs_f64(), aborted)
}

async fn flush(con: &mut Connection) {
    let _: () = redis::cmd("FLUSHALL").arg("SYNC").query_async(con).await.unwrap();
}

/// Bytes per document of `docs` job responses written by the store and
/// updated `updates` times each (the change stream, shared and bounded by
/// its max length, is deleted before measuring).
async fn store_bytes(store: &Store<JobResponse>, con: &mut Connection, p: &str, docs: usize, updates: u64) -> f64 {
    flush(con).await;
    let before = used_memory(con).await;
    let callers = 32;
    let mut tasks = Vec::new();
    for c in 0..callers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in (c..docs).step_by(callers) {
                assert!(matches!(store.create(&doc(i, 0)).await.unwrap(), PutOutcome::Written { .. }));
                let mut read = store.get(&format!("r-{i}")).await.unwrap().unwrap();
                for step in 1..=updates {
                    let out = store.update_in_place(&mut read, doc(i, step)).await.unwrap();
                    assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let _: () = redis::cmd("DEL").arg(format!("{p}:changes:s1")).query_async(con).await.unwrap();
    (used_memory(con).await - before) as f64 / docs as f64
}

/// Bytes per document of the plain layout: a hash of `v`, `scope`, `doc`
/// and the index fields, with the same unique key, group set and sorted list.
async fn plain_bytes(con: &mut Connection, p: &str, docs: usize, updates: u64) -> f64 {
    flush(con).await;
    let before = used_memory(con).await;
    for chunk in (0..docs).collect::<Vec<_>>().chunks(500) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            let d = doc(i, updates);
            let state = d.normalized_state();
            pipe.hset_multiple(
                format!("{p}:jobresponse:r-{i}"),
                &[
                    ("v", (updates + 1).to_string()),
                    ("scope", "s1".into()),
                    ("doc", serde_json::to_string(&d).unwrap()),
                    ("order", d.job_order_id.clone()),
                    ("state", state.clone()),
                ],
            )
            .ignore()
            .set(format!("{p}:jobresponse:byorder:o-{i}"), format!("r-{i}"))
            .ignore()
            .sadd(format!("{p}:jobresponse:bystate:s1:{state}"), format!("r-{i}"))
            .ignore()
            .zadd(format!("{p}:jobresponse:list:s1"), format!("r-{i}"), d.start_time)
            .ignore();
        }
        let _: () = pipe.query_async(con).await.unwrap();
    }
    (used_memory(con).await - before) as f64 / docs as f64
}

/// Server microseconds per EVALSHA of `script` over `n` puts spread over
/// 100 documents, after `warm` puts on each (so the op history is as full
/// as it gets after that many writes).
async fn cost(server: &ValkeyServer, docs: usize) {
    let prefix = unique_prefix("cost");
    let p = prefix.as_str().to_owned();
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let mut con = Connection::from(ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap());
    let doc_bytes = serde_json::to_string(&doc(0, 0)).unwrap().len();
    println!("## Bytes per stored document ({docs} job responses, {doc_bytes}-byte documents; INFO used_memory)\n");
    println!("| updates per document | plain hash + index keys | microdcs | microdcs / plain |");
    println!("|---|---|---|---|");
    for updates in [0u64, 10, 50] {
        let plain = plain_bytes(&mut con, &p, docs, updates).await;
        let ours = store_bytes(&store, &mut con, &p, docs, updates).await;
        println!("| {updates} | {plain:.0} | {ours:.0} | {:.2} |", ours / plain);
    }
    flush(&mut con).await;
    server_time(&mut con, &p).await;
}

/// `script` with each `(from, to)` replaced once; every `from` must be
/// there, so a change to the generator cannot silently void a variant.
fn without(script: &str, cuts: &[(&str, &str)]) -> String {
    let mut out = script.to_owned();
    for (from, to) in cuts {
        assert!(out.contains(from), "the generated put no longer has:\n{from}");
        out = out.replacen(from, to, 1);
    }
    out
}

/// The generated put with one part removed at a time, to price each part.
fn ablations() -> Vec<(&'static str, String)> {
    let put = JobResponse::PUT_SCRIPT;
    let grammar = "  if not vs or #vs > 16 or not string.find(vs, '^[1-9][0-9]*$') then return {6, 'v'} end
  if #vs == 16 then
    for i = 1, 16 do
      local a, b = string.byte(vs, i), string.byte('9007199254740991', i)
      if a ~= b then
        if a > b then return {6, 'v'} end
        break
      end
    end
  end
";
    let lookup = "if string.find(ops, '=', 1, true) then ops = '' end
if #ops % 12 ~= 0 or #ops / 12 > v then return {6, 'ops'} end
local at = string.find(ops, op, 1, true)
while at and at % 12 ~= 1 do at = string.find(ops, op, at + 1, true) end
if at then
  redis.call('HSET', doc_key, 'v', vs)
  return {7, v - (#ops - at + 1) / 12 + 1}
end
";
    let reads = [
        ("if was_1 ~= (ARGV[12] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7]} end\n", ""),
        ("if was_1 and (cur[6] ~= ARGV[13]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7]} end\n", ""),
        ("if was_2 ~= (ARGV[16] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7]} end\n", ""),
        ("if was_2 and (cur[7] ~= ARGV[17]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7]} end\n", ""),
    ];
    vec![
        ("without the op history lookup", without(put, &[(lookup, "")])),
        (
            "without the op history (lookup and append)",
            without(
                put,
                &[(lookup, ""), ("ops = ops .. op\nif #ops > keep then ops = string.sub(ops, -keep) end\n", "")],
            ),
        ),
        ("without the version grammar", without(put, &[(grammar, "")])),
        (
            "without the scope and doc checks",
            without(
                put,
                &[
                    ("  if cur[2] == false then return {6, 'scope'} end\n", ""),
                    ("  if cur[5] == false then return {6, 'doc'} end\n", ""),
                ],
            ),
        ),
        ("without the caller-read checks", without(put, &reads)),
    ]
}

/// Server time per put: the generated put, the minimal script, the
/// earlier generated puts and the ablations, in interleaved rounds; the
/// median per column.
async fn server_time(con: &mut Connection, p: &str) {
    let p = p.to_owned();
    let mut scripts: Vec<(&str, Script)> = vec![
        ("generated put", Script::new(JobResponse::PUT_SCRIPT)),
        ("minimal Lua CAS, same writes", Script::new(MINIMAL_CAS)),
        ("generated put before the op history change", Script::new(include_str!("put-before.lua"))),
        ("generated put before the server time work", Script::new(include_str!("put-before-cost.lua"))),
    ];
    let texts = ablations();
    scripts.extend(texts.iter().map(|(name, text)| (*name, Script::new(text))));
    let mut con = con.clone();
    // Each script writes its own 100 documents. The scripts take turns in
    // rounds of 300 puts (3 writes per document), in a rotating order, so
    // each sees the same moments of a shared, noisy machine; per column the
    // median round.
    let rounds = 20;
    let mut cols: Vec<[Vec<f64>; 2]> = scripts.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    let mut cpu: Vec<[Vec<f64>; 2]> = scripts.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    for (cell, warm) in [(0usize, 1u64), (1, 60)] {
        let base = |k: usize| (cell * scripts.len() + k) * 100;
        let mut raws: Vec<Raw> =
            scripts.iter().map(|(_, s)| Raw { script: s.clone(), con: con.clone(), prefix: p.clone() }).collect();
        // Fresh: the writes after the create; full: after 60 writes.
        for (k, raw) in raws.iter_mut().enumerate() {
            for i in 0..100 {
                for step in 0..warm {
                    raw.put(base(k) + i, step).await;
                }
            }
        }
        for r in 0..rounds {
            for j in 0..raws.len() {
                let k = (j + r) % raws.len();
                let before = command_usec(&mut con).await;
                let cpu_before = main_thread_cpu(&mut con).await;
                for w in 0..300 {
                    raws[k].put(base(k) + w % 100, warm + (r * 3 + w / 100) as u64).await;
                }
                let cpu_after = main_thread_cpu(&mut con).await;
                let after = command_usec(&mut con).await;
                let get =
                    |m: &std::collections::BTreeMap<String, (u64, u64)>| m.get("evalsha").copied().unwrap_or((0, 0));
                let (a, b) = (get(&after), get(&before));
                cols[k][cell].push((a.1 - b.1) as f64 / (a.0 - b.0) as f64);
                cpu[k][cell].push((cpu_after - cpu_before) * 1e6 / 300.0);
            }
        }
    }
    let med: Vec<[f64; 2]> = cols.into_iter().map(|[a, b]| [median(a), median(b)]).collect();
    println!(
        "\n## Server microseconds per put (INFO commandstats, EVALSHA; {rounds} interleaved rounds of 300 puts, median)\n"
    );
    println!(
        "| script | writes 2-{} of a document | ratio to minimal | writes 62-{} | ratio to minimal |",
        1 + rounds * 3,
        61 + rounds * 3
    );
    println!("|---|---|---|---|---|");
    for ((name, _), m) in scripts.iter().zip(&med) {
        println!("| {name} | {:.1} | {:.2} | {:.1} | {:.2} |", m[0], m[0] / med[1][0], m[1], m[1] / med[1][1]);
    }
    // The server's main-thread CPU time per put (not inflated when the
    // thread waits for a core), including reading the request and writing
    // the reply, which are the same for every script.
    let med: Vec<[f64; 2]> = cpu.into_iter().map(|[a, b]| [median(a), median(b)]).collect();
    println!("\n## Server main-thread CPU microseconds per put (INFO cpu, same rounds, median)\n");
    println!(
        "| script | writes 2-{} of a document | ratio to minimal | writes 62-{} | ratio to minimal |",
        1 + rounds * 3,
        61 + rounds * 3
    );
    println!("|---|---|---|---|---|");
    for ((name, _), m) in scripts.iter().zip(&med) {
        println!("| {name} | {:.1} | {:.2} | {:.1} | {:.2} |", m[0], m[0] / med[1][0], m[1], m[1] / med[1][1]);
    }
}

/// Many at a time: `get_many` of 100 against 100 `get`s, `put_many` of
/// 10,000 against one at a time, and claims by 50 workers, in one run.
async fn batch(server: &ValkeyServer) {
    let valkey = Valkey::connect_url(server.url(), unique_prefix("batch"), WriteOptions::default()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let n = 10_000;
    let docs: Vec<JobResponse> = (0..n).map(|i| doc(i, 0)).collect();
    let one = |i: usize| JobResponse { id: format!("one-{i}"), job_order_id: format!("one-o-{i}"), ..doc(i, 0) };
    let t = Instant::now();
    for i in 0..n {
        assert!(matches!(store.create(&one(i)).await.unwrap(), PutOutcome::Written { .. }));
    }
    let one_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let out = store.put_many(&docs, microdcs_valkey::Expect::Create).await;
    let many_s = t.elapsed().as_secs_f64();
    assert!(out.iter().all(|o| matches!(o, Ok(PutOutcome::Written { .. }))));
    println!("## Many at a time\n");
    println!("| operation | figure | ratio |");
    println!("|---|---|---|");
    println!("| create one at a time ({n}), documents/s | {:.0} | 1.00 |", n as f64 / one_s);
    println!("| put_many ({n}), documents/s | {:.0} | {:.2} |", n as f64 / many_s, one_s / many_s);

    let ids: Vec<String> = (0..100).map(|i| format!("r-{i}")).collect();
    let rounds = 200;
    let (mut singles, mut many) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        for id in &ids {
            store.get(id).await.unwrap().unwrap();
        }
        singles.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        let got = store.get_many(&ids).await.unwrap();
        many.push(t.elapsed().as_secs_f64() * 1e6);
        assert_eq!(got.len(), 100);
    }
    let (s, m) = (median(singles), median(many));
    println!("| 100 gets one after another, us (median of {rounds}) | {s:.0} | 1.00 |");
    println!("| get_many of 100, us (median of {rounds}) | {m:.0} | {:.2}x faster |", s / m);

    // Claims: 1,000 queued jobs, 50 workers moving each to running.
    let queued: Vec<JobResponse> = (0..1000)
        .map(|i| JobResponse {
            id: format!("q-{i}"),
            job_order_id: format!("q-o-{i}"),
            state: vec!["Queued".into()],
            ..doc(i, 0)
        })
        .collect();
    assert!(store.put_many(&queued, microdcs_valkey::Expect::Create).await.iter().all(Result::is_ok));
    let t = Instant::now();
    let workers: Vec<_> = (0..50)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut n = 0u32;
                while store
                    .claim(JobResponse::by_state("s1", "Queued"), |d| {
                        (d.state == ["Queued"]).then(|| JobResponse { state: vec!["Running".into()], ..d.clone() })
                    })
                    .await
                    .unwrap()
                    .is_some()
                {
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut claimed = 0;
    for w in workers {
        claimed += w.await.unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(claimed, 1000);
    println!("| claims by 50 workers over 1,000 queued jobs, claims/s | {:.0} | |", f64::from(claimed) / secs);
}

/// `Store::step` against a raw `EVALSHA` of the same step script, its
/// arguments built once from the script's layout (only the version and op
/// id vary), one caller, interleaved rounds; then the server time per step
/// beside a put of the same document.
async fn step_bench(server: &ValkeyServer, quick: bool) {
    use microdcs_schema::lua::StepLayout;
    use microdcs_tests::fixtures::SfcState;
    use microdcs_valkey::{store::Effects, store::StepOutcome, store::WorkEntry};

    let prefix = unique_prefix("step");
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<SfcState>();
    let mut stats = Connection::from(ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap());
    let doc = |job: &str| SfcState {
        job_id: job.into(),
        scope: "s1".into(),
        step: "mix".into(),
        deadline: Some(1_700_000_000_000),
        running: true,
        wait_type: None,
        wait_start: None,
    };
    let effects = Effects::new().work(WorkEntry::new().field("step", "mix").field("action", "start"));
    for job in ["j-store", "j-raw"] {
        assert!(matches!(store.step(None, &doc(job), &effects).await.unwrap(), StepOutcome::Written { .. }));
    }
    // The raw call: every position from the layout, as the store fills it
    // for an update that keeps its index entries.
    let l = StepLayout::new(&SfcState::SPEC);
    let o = l.outbox.expect("the SFC state has an outbox");
    let p = valkey.prefix();
    let doc_key = SfcState::key(p, "j-raw").unwrap();
    let mut keys = vec![doc_key.clone(); l.num_keys];
    let mut args = vec![String::new(); l.num_args];
    let c = &l.put.common;
    keys[c.changes_key - 1] = Plant::changes_key(p, "s1").unwrap();
    let registry = c.registry_key.expect("the plant's types are not sharded: the script writes the registry");
    keys[registry - 1] = Plant::scopes_key(p).unwrap();
    keys[l.put.tomb_key - 1] = Plant::tombstones_key(p, "sfc", "j-raw").unwrap();
    keys[o.work_key - 1] = Plant::sfc_work_key(p, "s1").unwrap();
    let stored: Vec<Option<String>> =
        redis::cmd("HMGET").arg(&doc_key).arg(&l.put.fields).query_async(&mut stats).await.unwrap();
    let text = serde_json::to_string(&doc("j-raw")).unwrap();
    for (pos, v) in [
        (c.id, "j-raw"),
        (c.scope, "s1"),
        (l.put.doc, text.as_str()),
        (c.kind, "sfc"),
        (c.maxlen, "10000"),
        (o.marker_flag, "0"),
        (o.marker_ttl, "3600000"),
        (o.entries, "1"),
    ] {
        args[pos - 1] = v.to_owned();
    }
    args[c.channel - 1] = Plant::nudge_channel(p, "sfc").unwrap();
    args[l.put.history - 1] = WriteOptions::default().op_history.to_string();
    for ix in &l.put.indexes {
        let key = match ix.index.name.as_str() {
            "due" => Some(SfcState::due_key(p, "s1").unwrap()),
            "active" => Some(SfcState::active_key(p, "s1").unwrap()),
            _ => None,
        };
        for slots in [ix.new, ix.index.old] {
            args[slots.flag - 1] = if key.is_some() { "1" } else { "0" }.to_owned();
            if let Some(k) = &key {
                keys[slots.key - 1] = k.clone();
                for (k, f) in ix.index.fields.iter().enumerate() {
                    args[slots.value(k) - 1] = stored[f.at].clone().unwrap_or_default();
                }
            }
        }
    }
    // One work entry of two fields, then no family effects.
    args.extend(["2", "step", "mix", "action", "start", "0"].map(str::to_owned));
    let script = Script::new(SfcState::STEP_SCRIPT);
    let mut con = valkey.connection();

    let n = if quick { 300 } else { 3000 };
    let mut read = store.get("j-store").await.unwrap().unwrap();
    let (mut via_store, mut via_raw) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for raw_version in 1..=n as u64 {
        let t = Instant::now();
        let out = store.step_in_place(&mut read, doc("j-store"), &effects).await.unwrap();
        via_store.push(t.elapsed());
        assert!(matches!(out, StepOutcome::Written { .. }), "{out:?}");

        args[c.expect - 1] = raw_version.to_string();
        args[c.op - 1] = microdcs_valkey::store::new_op_id();
        let mut inv = script.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        for a in &args {
            inv.arg(a);
        }
        let t = Instant::now();
        let reply: (i64, i64, Vec<i64>) = inv.invoke_async(&mut con).await.unwrap();
        via_raw.push(t.elapsed());
        assert_eq!(reply, (1, i64::try_from(raw_version).unwrap() + 1, vec![]), "the raw step wrote");
    }
    via_store.sort();
    via_raw.sort();
    let (s50, r50) = (pct(&via_store, 0.5), pct(&via_raw, 0.5));
    println!("## Workflow step ({n} steps each, one caller, interleaved)\n");
    println!("| path | p50 us | p99 us | ratio p50 |");
    println!("|---|---|---|---|");
    println!("| raw EVALSHA of the step script | {:.1} | {:.1} | 1.00 |", us(r50), us(pct(&via_raw, 0.99)));
    println!("| Store::step | {:.1} | {:.1} | {:.2} |", us(s50), us(pct(&via_store, 0.99)), us(s50) / us(r50));

    // Server time: the same document written by the step and by the put,
    // interleaved in rounds so both see the same machine.
    // The step with family effects as a chat message sends them: a
    // counter, a hash field, a set and a sorted set (`Effects::incr`,
    // `hincr`, `add`, `zadd`), each in the script.
    let plant = Plant::open(valkey.clone());
    let (seq, cursors) = (Plant::pubseq(&plant, "s1").unwrap(), Plant::publisher_cursors(&plant).unwrap());
    let refs = Plant::reference(&plant, "sfc", "s1").unwrap();
    let extras = microdcs_tests::fixtures::Extras::open(valkey.clone());
    let zset = microdcs_tests::fixtures::Extras::canary_runs(&extras, "s1", "mix").unwrap();
    let (mut step_us, mut put_us, mut fx_us) = (Vec::new(), Vec::new(), Vec::new());
    let mut read = store.get("j-store").await.unwrap().unwrap();
    for _ in 0..if quick { 3 } else { 10 } {
        for (i, per) in [&mut step_us, &mut put_us, &mut fx_us].into_iter().enumerate() {
            let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut stats).await.unwrap();
            for n in 0..200 {
                if i == 0 {
                    let out = store.step_in_place(&mut read, doc("j-store"), &effects).await.unwrap();
                    assert!(matches!(out, StepOutcome::Written { .. }), "{out:?}");
                } else if i == 2 {
                    let with = effects.clone().incr(&seq, 1).hincr(&cursors, "s1", 1).add(&refs, "mix").zadd(
                        &zset,
                        &format!("m-{}", n % 50),
                        f64::from(n),
                    );
                    let out = store.step_in_place(&mut read, doc("j-store"), &with).await.unwrap();
                    assert!(matches!(&out, StepOutcome::Written { values, .. } if values.len() == 4), "{out:?}");
                } else {
                    let out = store.update_in_place(&mut read, doc("j-store")).await.unwrap();
                    assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
                }
            }
            let (calls, usec) = command_usec(&mut stats).await.get("evalsha").copied().unwrap_or((0, 0));
            per.push(usec as f64 / calls.max(1) as f64);
        }
    }
    let (st, pt, ft) = (median(step_us), median(put_us), median(fx_us));
    println!("\n| server time (`commandstats`, median of rounds of 200) | us per call | ratio |");
    println!("|---|---|---|");
    println!("| put of the same state (no work, no marker) | {pt:.1} | 1.00 |");
    println!("| step with one work entry | {st:.1} | {:.2} |", st / pt);
    println!(
        "| the same step with 4 family effects (counter, hash field, set, sorted set) | {ft:.1} | {:.2} (x{:.2} the step) |",
        ft / pt,
        ft / st
    );
}

/// The server main thread's CPU seconds so far (user + system).
async fn main_thread_cpu(con: &mut Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query_async(con).await.unwrap();
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| *k == "used_cpu_user_main_thread" || *k == "used_cpu_sys_main_thread")
        .map(|(_, v)| v.trim().parse::<f64>().unwrap())
        .sum()
}

/// Pins the server to the first core and this process to the second
/// (where `taskset` exists), so the client's work does not share the
/// server's core.
async fn pin(con: &mut Connection) {
    let info: String = redis::cmd("INFO").arg("server").query_async(con).await.unwrap();
    let pid = info.lines().find_map(|l| l.strip_prefix("process_id:")).unwrap_or("").trim().to_owned();
    let run =
        |args: &[&str]| std::process::Command::new("taskset").args(args).output().is_ok_and(|o| o.status.success());
    let me = std::process::id().to_string();
    let pinned = run(&["-a", "-cp", "0", &pid]) && run(&["-a", "-cp", "1", &me]);
    println!("server pinned to core 0, client to core 1: {pinned}");
}

// The round-trip table (`--network`).
#[path = "store/network.rs"]
mod network;

// The multi-valued index table (`--each`).
#[path = "store/each.rs"]
mod each;

// What the read-back check costs per put (`--read-back`).
#[path = "store/read_back.rs"]
mod read_back;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--server-time") {
        let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
        let mut con =
            Connection::from(ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap());
        pin(&mut con).await;
        server_time(&mut con, unique_prefix("time").as_str()).await;
        return;
    }
    if args.iter().any(|a| a == "--cost") {
        let docs =
            args.iter().position(|a| a == "--docs").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(10_000);
        let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
        let mut con =
            Connection::from(ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap());
        pin(&mut con).await;
        cost(&server, docs).await;
        return;
    }
    if args.iter().any(|a| a == "--step") {
        let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
        let mut con =
            Connection::from(ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap());
        pin(&mut con).await;
        step_bench(&server, args.iter().any(|a| a == "--quick")).await;
        return;
    }
    if args.iter().any(|a| a == "--each") {
        let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
        each::each(&server, args.iter().any(|a| a == "--quick")).await;
        return;
    }
    if args.iter().any(|a| a == "--read-back") {
        let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
        read_back::read_back(&server, args.iter().any(|a| a == "--quick")).await;
        return;
    }
    if args.iter().any(|a| a == "--network") {
        let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
        network::pings(&server).await;
        network::network(&server, args.iter().any(|a| a == "--quick")).await;
        return;
    }
    if args.iter().any(|a| a == "--batch") {
        let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
        batch(&server).await;
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 300 } else { 3000 };
    let server = ValkeyServer::start_local(&[]).unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("bench");
    let p = prefix.as_str().to_owned();
    let write = WriteOptions::default();
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), write).await.unwrap();
    let store = Plant::open(valkey.clone()).store::<JobResponse>();
    let con = valkey.connection();
    let mut stats_con =
        Connection::from(ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap());
    let script = Script::new(JobResponse::PUT_SCRIPT);
    let mut raw = Raw { script: script.clone(), con: con.clone(), prefix: p.clone() };

    // Warm up.
    raw.put(0, 0).await;
    assert!(matches!(store.create(&doc(1, 0)).await.unwrap(), PutOutcome::Written { .. }));

    // 1 caller latency: put (update with known version) and get.
    let mut read = store.get("r-1").await.unwrap().unwrap();
    let mut store_put = Vec::with_capacity(n);
    let usec_before = command_usec(&mut stats_con).await;
    let before = command_calls(&mut stats_con).await;
    for step in 1..=n as u64 {
        let t = Instant::now();
        let out = store.update_in_place(&mut read, doc(1, step)).await.unwrap();
        store_put.push(t.elapsed());
        assert!(matches!(out, PutOutcome::Written { .. }));
    }
    let after = command_calls(&mut stats_con).await;
    let evalsha_per_put = (after["evalsha"] - before.get("evalsha").copied().unwrap_or(0)) as f64 / n as f64;
    let usec_after = command_usec(&mut stats_con).await;
    let server_usec = |cmds: &[&str],
                       a: &std::collections::BTreeMap<String, (u64, u64)>,
                       b: &std::collections::BTreeMap<String, (u64, u64)>| {
        cmds.iter().map(|c| a.get(*c).map_or(0, |x| x.1) - b.get(*c).map_or(0, |x| x.1)).sum::<u64>() as f64 / n as f64
    };
    let store_server_us = server_usec(&["evalsha"], &usec_after, &usec_before);
    let mut raw_put = Vec::with_capacity(n);
    for step in 1..=n as u64 {
        let t = Instant::now();
        raw.put(0, step).await;
        raw_put.push(t.elapsed());
    }
    let mut store_get = Vec::with_capacity(n);
    let before = command_calls(&mut stats_con).await;
    for _ in 0..n {
        let t = Instant::now();
        let got = store.get("r-1").await.unwrap();
        store_get.push(t.elapsed());
        assert!(got.is_some());
    }
    let after = command_calls(&mut stats_con).await;
    let hgetall_per_get = (after["hgetall"] - before.get("hgetall").copied().unwrap_or(0)) as f64 / n as f64;
    let mut raw_get = Vec::with_capacity(n);
    let mut rc = con.clone();
    let key = format!("{p}:jobresponse:r-1");
    for _ in 0..n {
        let t = Instant::now();
        let _: std::collections::HashMap<String, Vec<u8>> =
            redis::cmd("HGETALL").arg(&key).query_async(&mut rc).await.unwrap();
        raw_get.push(t.elapsed());
    }
    // WATCH/MULTI/EXEC at 1 caller.
    let client = redis::Client::open(server.url()).unwrap();
    let mut wcon = client.get_multiplexed_async_connection().await.unwrap();
    let mut watch_lat = Vec::with_capacity(n);
    let usec_before = command_usec(&mut stats_con).await;
    let before = command_calls(&mut stats_con).await;
    for step in 0..n as u64 {
        let t = Instant::now();
        assert!(watch_put(&mut wcon, &p, 2, step).await);
        watch_lat.push(t.elapsed());
    }
    let after = command_calls(&mut stats_con).await;
    let usec_after = command_usec(&mut stats_con).await;
    let watch_server_us = server_usec(&["watch", "hmget", "multi", "exec"], &usec_after, &usec_before);
    let rt_watch = ["watch", "hmget", "multi", "exec"]
        .iter()
        .map(|c| after.get(*c).copied().unwrap_or(0) - before.get(*c).copied().unwrap_or(0))
        .sum::<u64>() as f64
        / n as f64;
    for v in [&mut store_put, &mut raw_put, &mut store_get, &mut raw_get, &mut watch_lat] {
        v.sort();
    }

    println!("## Latency, 1 caller, {n} operations each (microseconds)\n");
    println!("| operation | p50 | p99 | p50 ratio to raw |");
    println!("|---|---|---|---|");
    let row = |name: &str, v: &[Duration], base: &[Duration]| {
        println!(
            "| {name} | {:.1} | {:.1} | {:.2} |",
            us(pct(v, 0.5)),
            us(pct(v, 0.99)),
            us(pct(v, 0.5)) / us(pct(base, 0.5))
        );
    };
    row("store put (CAS update, known version)", &store_put, &raw_put);
    row("raw EVALSHA of the same script", &raw_put, &raw_put);
    row("WATCH/MULTI/EXEC read-modify-write", &watch_lat, &raw_put);
    row("store get", &store_get, &raw_get);
    row("raw HGETALL", &raw_get, &raw_get);

    println!("\n## Throughput, writers on distinct documents (operations per second)\n");
    println!(
        "| callers | store (1 multiplexed conn) | raw EVALSHA (same conn) | store / raw | WATCH/MULTI (1 conn per writer) | store / WATCH | WATCH aborts |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut base = 1000;
    // Three interleaved rounds per row; the median of each column is shown
    // (the machine is shared: single runs vary by 30 % and more).
    for callers in [1usize, 16, 64] {
        let per = (n * 2 / callers).max(50);
        let (mut ss, mut rs, mut ws, mut aborted) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..3 {
            ss.push(store_throughput(&store, callers, per, base).await);
            base += callers;
            rs.push(raw_throughput(&script, &con, &p, callers, per, base).await);
            base += callers;
            let (w, a) = watch_throughput(server.url(), &p, callers, per, base).await;
            ws.push(w);
            aborted += a;
            base += callers;
        }
        let (s, r, w) = (median(ss), median(rs), median(ws));
        println!("| {callers} | {s:.0} | {r:.0} | {:.2} | {w:.0} | {:.2} | {aborted} |", s / r, s / w);
    }

    // A simulated network: every chunk delayed 1 ms each way (2 ms round
    // trip), so round trips cost what they cost between hosts.
    let proxy = FaultProxy::start_with_delay(server.host_port(), Duration::from_millis(1)).await;
    let net = Valkey::connect_url(&proxy.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let net_store = Plant::open(net.clone()).store::<JobResponse>();
    let net_con = net.connection();
    println!("\n## Throughput over a simulated network (1 ms each way), writers on distinct documents\n");
    println!(
        "| callers | store (1 multiplexed conn) | raw EVALSHA (same conn) | store / raw | WATCH/MULTI (1 conn per writer) | store / WATCH |"
    );
    println!("|---|---|---|---|---|---|");
    for callers in [1usize, 16, 64] {
        let per = if quick { 20 } else { 100 };
        let s = store_throughput(&net_store, callers, per, base).await;
        base += callers;
        let r = raw_throughput(&script, &net_con, &p, callers, per, base).await;
        base += callers;
        let (w, _) = watch_throughput(&proxy.url(), &p, callers, per, base).await;
        base += callers;
        println!("| {callers} | {s:.0} | {r:.0} | {:.2} | {w:.0} | {:.2} |", s / r, s / w);
    }

    println!("\n## Round trips per operation\n");
    println!("| operation | commands sent by the client per op (commandstats) |");
    println!("|---|---|");
    println!("| store put (update) | {evalsha_per_put:.2} EVALSHA |");
    println!("| store get | {hgetall_per_get:.2} HGETALL |");
    println!("| WATCH/MULTI/EXEC | {rt_watch:.2} (WATCH, HMGET, MULTI, EXEC; MULTI..EXEC pipelined: 3 round trips) |");
    println!("\n## Server time per write (INFO commandstats usec)\n");
    println!("| path | server microseconds per write |");
    println!("|---|---|");
    println!("| store put: EVALSHA of the generated script | {store_server_us:.1} |");
    println!("| WATCH + HMGET + MULTI + EXEC | {watch_server_us:.1} |");
    drop(server);
}
