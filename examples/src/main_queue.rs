//! `queue`: a BullMQ-style job queue built on the library
//! (`src/queue.rs`), run end to end against a Valkey it starts itself (or
//! `APP_MicroDcs__Valkey__ConnectionString`): two tenants' queues, delayed
//! and prioritised jobs, 8 workers with failures and retries, one worker
//! that dies holding a job, a rate limit, the events and the counts.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use microdcs_examples::queue::{Job, JobOptions, Queue, Queues, Settled};
use microdcs_valkey::store::MaintenanceOptions;

use microdcs_examples::Res;

#[tokio::main]
async fn main() -> ExitCode {
    microdcs_examples::main_of("queue", run()).await
}

async fn run() -> Res<()> {
    let (valkey, _server) = microdcs_examples::connect_or_start("queue").await?;
    println!("## queue (prefix `{}`)\n", valkey.prefix());
    println!("| family | type | template |\n|---|---|---|");
    for f in Queues::SPEC.all_families() {
        println!("| {} {} | {} | `{}` |", f.owner, f.name, f.key_type.type_name(), f.key);
    }

    let lease = Duration::from_millis(800);
    let mut queues = Vec::new();
    for (tenant, rate) in [("acme:emails", None), ("globex:reports", Some(50))] {
        let mut q = Queue::new(&valkey, tenant);
        if let Some(per_second) = rate {
            q = q.rate_limit(per_second, Duration::from_secs(1))?;
        }
        let opts = JobOptions { attempts: 3, backoff: Duration::from_millis(50), ..JobOptions::default() };
        for i in 0..200 {
            let o = JobOptions { priority: u32::from(i % 10 == 0), ..opts.clone() };
            let _ = q.enqueue(&format!("{tenant}-{i}"), "work", &format!("{{\"n\":{i}}}"), &o).await?;
        }
        let delayed = JobOptions { delay: Duration::from_millis(300), ..opts.clone() };
        let _ = q.enqueue(&format!("{tenant}-delayed"), "work", "{}", &delayed).await?;
        // Enqueued twice by key: one job.
        let again = q.enqueue(&format!("{tenant}-0"), "work", "{}", &opts).await?;
        println!("\n{tenant}: 201 jobs enqueued; `{tenant}-0` enqueued again -> {again:?}");
        queues.push(q);
    }
    // A worker claims a job and dies holding it: the stall sweep takes it back.
    let doomed = queues[0].claim("doomed", lease).await?.map(|j| j.doc.id);
    println!("worker `doomed` died holding {doomed:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for q in &queues {
        let (q2, stop2) = (q.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop2.load(Ordering::Relaxed) {
                if let Err(e) = q2.promote().await {
                    eprintln!("queue: promote in {}: {e}", q2.name());
                }
                if let Err(e) = q2.recover_stalled().await {
                    eprintln!("queue: stall sweep in {}: {e}", q2.name());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
        for w in 0..4 {
            let (q, stop) = (q.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let me = format!("{}-w{w}", q.name());
                while !stop.load(Ordering::Relaxed) {
                    let mut job = match q.claim(&me, lease).await {
                        Ok(Some(job)) => job,
                        Ok(None) => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                        Err(e) => {
                            eprintln!("queue: {me}: claim: {e}");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    };
                    if q.progress(&mut job, 50).await.ok() != Some(Settled::Done) {
                        continue;
                    }
                    // One attempt in seven fails.
                    let roll = job.doc.id.bytes().map(u64::from).sum::<u64>() + u64::from(job.doc.attempts) * 3;
                    let settled = if roll.is_multiple_of(7) {
                        q.fail(&mut job, "flaky downstream").await
                    } else {
                        q.complete(&mut job).await
                    };
                    if let Err(e) = settled {
                        eprintln!("queue: {me}: settling {}: {e}", job.doc.id);
                    }
                }
            }));
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let settled = loop {
        let mut settled = 0;
        for q in &queues {
            let s = q.stats().await?;
            settled += s["completed"].parse::<usize>()? + s["dead"].parse::<usize>()?;
        }
        if settled == 402 || tokio::time::Instant::now() > deadline {
            break settled;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await?;
    }

    println!("\n| queue | completed | retried | dead |\n|---|---|---|---|");
    for q in &queues {
        let s = q.stats().await?;
        println!("| {} | {} | {} | {} |", q.name(), s["completed"], s["retried"], s["dead"]);
    }
    if let Some(id) = doomed {
        let job = queues[0].store().get_in(queues[0].name(), &id).await?;
        let show = |j: &Job| format!("{} after {} attempts", j.state, j.attempts);
        println!("\nthe doomed worker's job {id}: {}", job.map_or_else(|| "gone".into(), |j| show(&j.doc)));
    }
    // One store per type: verify walks every queue's jobs.
    let report = queues[0].store().verify(&MaintenanceOptions::default()).await?;
    println!("verify jobs of every queue: {} documents, {} differences", report.documents, report.differences.len());
    if settled != 402 {
        return Err(format!("only {settled} of 402 jobs settled within 60 s").into());
    }
    if !report.differences.is_empty() {
        return Err("verify found differences".into());
    }
    Ok(())
}
