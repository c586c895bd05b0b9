//! Memory of the miroir task store's mix against a plain hand-written
//! layout, in the same run: 100,000 idempotency entries (the tiny,
//! expiring documents that dominate it) and 2,000 tasks, written through
//! the library, then the same data as plain hashes (the fields the
//! documents carry, the same expiry, the same index set for tasks).
//! `INFO used_memory` before and after each, the server flushed between.
//!
//! `cargo bench -p microdcs-tests --bench memory` (`-- --quick` for a
//! tenth of the entries).

use microdcs_examples::miroir::{Idempotency, Task, TaskStore};
use microdcs_tests::used_memory;
use microdcs_valkey::client::Connection;
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::testing::ValkeyServer;
use microdcs_valkey::{Expect, Valkey, config::WriteOptions};

fn entry(i: usize) -> Idempotency {
    Idempotency { id: format!("req-{i:08}-7f3c9a2e"), status: 200, body: "{\"ok\":true,\"task\":42}".into() }
}

fn task(i: usize) -> Task {
    Task {
        id: format!("t-{i}"),
        index_uid: "movies".into(),
        status: "enqueued".into(),
        details: "{\"kind\":\"documentAdditionOrUpdate\"}".into(),
        enqueued_at: 1_700_000_000_000 + i as i64,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (entries, tasks) = if quick { (10_000, 200) } else { (100_000, 2_000) };
    // `--listpack-value N`: the server's `hash-max-listpack-value` (64 by
    // default): a hash with a longer value leaves the compact encoding.
    let args: Vec<String> = std::env::args().collect();
    let listpack = args.iter().position(|a| a == "--listpack-value").and_then(|i| args.get(i + 1)).cloned();
    let extra: Vec<&str> = listpack.iter().flat_map(|v| ["--hash-max-listpack-value", v.as_str()]).collect();
    let server = ValkeyServer::start_local(&extra).unwrap_or_else(|e| panic!("{e}"));
    let mut con = Connection::from(ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap());
    let valkey =
        Valkey::connect_url(server.url(), microdcs_valkey::KeyPrefix::new("miroir").unwrap(), WriteOptions::default())
            .await
            .unwrap();
    let store = TaskStore::new(valkey.clone()).unwrap();
    let before = used_memory(&mut con).await;
    let idem = store.idempotency();
    let batch: Vec<Idempotency> = (0..entries).map(entry).collect();
    for chunk in batch.chunks(1000) {
        for out in idem.put_many(chunk, Expect::Create).await {
            let _ = out.unwrap();
        }
    }
    let ts: Vec<Task> = (0..tasks).map(task).collect();
    for out in store.table::<Task>().put_many(&ts, Expect::Create).await {
        let _ = out.unwrap();
    }
    let ours = used_memory(&mut con).await - before;
    let _: () = redis::cmd("FLUSHALL").arg("SYNC").query_async(&mut con).await.unwrap();

    // The plain layout: what a hand-written store keeps for the same data.
    let before = used_memory(&mut con).await;
    for chunk in batch.chunks(1000) {
        let mut pipe = redis::pipe();
        for e in chunk {
            let key = format!("miroir:idemp:{}", e.id);
            pipe.cmd("HSET").arg(&key).arg("status").arg(e.status).arg("body").arg(&e.body).ignore();
            pipe.cmd("PEXPIRE").arg(&key).arg(24 * 3600 * 1000).ignore();
        }
        let () = pipe.query_async(&mut con).await.unwrap();
    }
    let mut pipe = redis::pipe();
    for t in &ts {
        let key = format!("miroir:task:{}", t.id);
        pipe.cmd("HSET")
            .arg(&key)
            .arg("index_uid")
            .arg(&t.index_uid)
            .arg("status")
            .arg(&t.status)
            .arg("details")
            .arg(&t.details)
            .arg("enqueued_at")
            .arg(t.enqueued_at)
            .ignore();
        pipe.cmd("SADD").arg("miroir:index:tasks").arg(&t.id).ignore();
    }
    let () = pipe.query_async(&mut con).await.unwrap();
    let plain = used_memory(&mut con).await - before;

    let items = (entries + tasks) as f64;
    let setting = listpack.as_deref().unwrap_or("64 (default)");
    println!(
        "## Memory of the miroir mix ({entries} idempotency entries + {tasks} tasks; INFO used_memory; \
         hash-max-listpack-value {setting})\n"
    );
    println!("| layout | bytes | bytes per item | ratio |");
    println!("|---|---|---|---|");
    println!("| plain hashes (hand-written) | {plain} | {:.0} | 1.00 |", plain as f64 / items);
    println!("| microdcs | {ours} | {:.0} | {:.2} |", ours as f64 / items, ours as f64 / plain as f64);
}
