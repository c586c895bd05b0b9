//! `miroir`: the task store of a search cluster's control plane, declared
//! with microdcs (`src/miroir.rs`), run end to end against a Valkey it
//! starts itself (or `APP_MicroDcs__Valkey__ConnectionString`).

use std::process::ExitCode;
use std::time::Duration;

use microdcs_examples::miroir::{AdminSession, Alias, Miroir, Task, TaskStore};
use microdcs_valkey::{Expect, Page, lease::Acquire, store::MaintenanceOptions};

use microdcs_examples::Res;

#[tokio::main]
async fn main() -> ExitCode {
    microdcs_examples::main_of("miroir", run()).await
}

async fn run() -> Res<()> {
    let (valkey, _server) = microdcs_examples::connect_or_start("miroir").await?;
    let store = TaskStore::new(valkey.clone())?;
    let ks = Miroir::open(valkey.clone());
    println!("## miroir task store (prefix `{}`)\n", valkey.prefix());
    println!("| family | type | template |\n|---|---|---|");
    for f in Miroir::SPEC.all_families() {
        println!("| {} {} | {} | `{}` |", f.owner, f.name, f.key_type.type_name(), f.key);
    }

    println!("\n## Operations\n");
    for i in 0..5 {
        let t = Task {
            id: format!("t-{i}"),
            index_uid: "movies".into(),
            status: "enqueued".into(),
            details: "{}".into(),
            enqueued_at: 1_700_000_000_000 + i,
        };
        let _ = store.table::<Task>().put(&t, Expect::Any).await?;
    }
    let mut tasks = store.list_tasks(Page::first(100)).await?.ids;
    tasks.sort();
    println!("  tasks in the index set                -> {tasks:?}");
    let _ =
        store.table::<Alias>().put(&Alias { id: "search".into(), indexes: vec!["movies".into()] }, Expect::Any).await?;
    for i in 0..3 {
        let id = format!("j-{i}");
        let _ = store
            .table::<microdcs_examples::miroir::Job>()
            .delete_id(&id, microdcs_valkey::store::DeleteExpect::Any)
            .await?;
        let _ = store.enqueue_job(&id, "reindex").await?;
    }
    while let Some(job) = store.claim_job("worker-1").await? {
        println!("  claimed job                           -> {} ({})", job.id, job.state);
    }
    match store.acquire_leader("cluster", "pod-a", Duration::from_secs(10)).await? {
        Acquire::Acquired(lease) => println!("  leader lease                          -> pod-a, fence {}", lease.token),
        Acquire::Held { owner, .. } => println!("  leader lease                          -> held by {owner}"),
    }
    store.pin_session("s-1", "node-2", None).await?;
    println!("  idempotency key req-1 stored          -> {}", store.remember("req-1", 202, "accepted").await?);
    println!("  idempotency key req-1 stored again    -> {}", store.remember("req-1", 202, "accepted").await?);
    for i in 0..3 {
        store.record_canary_run("c-1", &format!("run-{i}"), i).await?;
    }
    store.set_cdc_cursor("kafka", "movies", "1042").await?;
    let _ = store.overflow("kafka", "{\"op\":\"upsert\"}").await?;
    store.observe_scoped_key("pod-a", "movies", "key-1").await?;
    let mut sub = Miroir::revoked(&ks)?.subscribe().await?;
    let admin = AdminSession { id: "admin-1".into(), user: "ada".into(), revoked: false };
    let _ = store.table::<AdminSession>().put(&admin, Expect::Any).await?;
    let _ = store.revoke_admin_session("admin-1").await?;
    println!("  revocation received                   -> {:?}", sub.next(Duration::from_secs(5)).await);
    println!("  admin login from 10.0.0.9 allowed     -> {}", store.admin_login_allowed("10.0.0.9").await?);
    println!("  after a failure, backoff              -> {:?}", store.admin_login_failed("10.0.0.9").await?);

    let report = store.table::<Task>().verify(&MaintenanceOptions::default()).await?;
    println!(
        "\n  verify tasks                          -> {} documents, clean: {}",
        report.documents,
        report.is_clean()
    );
    println!(
        "  task t-0 scope                        -> {:?}",
        store.table::<Task>().get("t-0").await?.map(|s| s.scope)
    );
    Ok(())
}
