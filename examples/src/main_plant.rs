//! The main demo: the seed's plant keyspace against a real Valkey.
//!
//! Connects to `APP_MicroDcs__Valkey__ConnectionString` when set, otherwise
//! starts its own `valkey-server` through the test harness. Prints the key
//! table, then writes job orders, job responses (with state changes) and work
//! masters and reads them back through every index.

use std::process::ExitCode;

use microdcs_examples::plant::{JobOrder, JobResponse, WorkMaster, key_table};
use microdcs_tests::ValkeyServer;
use microdcs_valkey::redis;
use microdcs_valkey::{Expect, MicroDcsConfig, Page, PutOutcome, Valkey};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plant: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

async fn run() -> Res<()> {
    // Configuration from the environment (`APP_MicroDcs__Valkey__*`); without
    // a connection string the demo starts its own server.
    let mut config = MicroDcsConfig::from_env()?;
    let _server = if std::env::var_os("APP_MicroDcs__Valkey__ConnectionString").is_some() {
        None
    } else {
        let server = ValkeyServer::start_local(&[])?;
        println!("Started valkey-server on {}", server.host_port());
        config.set("Valkey:ConnectionString", &server.host_port())?;
        Some(server)
    };
    println!("Configuration: {}", config.valkey);
    let valkey = Valkey::connect(&config.valkey).await?;
    let prefix = valkey.prefix().clone();
    let mut con = valkey.connection();
    let info: String = redis::cmd("INFO").arg("server").query_async(&mut con).await?;
    let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    let version = field("valkey_version:").or_else(|| field("redis_version:")).unwrap_or("unknown");
    println!("Connected: server version {version}\n");

    println!("## Plant keyspace (prefix `{prefix}`)\n");
    println!("| Family | Type | Template | Key with sample values |");
    println!("|---|---|---|---|");
    for row in key_table(&prefix)? {
        // `|` would end a Markdown table cell.
        let cell = |s: &str| s.replace('|', "\\|");
        println!("| {} | {} | `{}` | `{}` |", row.family, row.key_type, cell(row.template), cell(&row.key));
    }

    documents(&valkey).await
}

fn show(what: &str, out: PutOutcome) {
    println!("  {what:<52} -> {out:?}");
}

async fn documents(valkey: &Valkey) -> Res<()> {
    let scope = "line-1";
    let masters = valkey.store::<WorkMaster>();
    let orders = valkey.store::<JobOrder>();
    let responses = valkey.store::<JobResponse>();
    // Start clean so the demo can run again against the same server.
    for id in ["r-1", "r-2"] {
        let _ = responses.delete_id(id, Expect::Any).await?;
    }
    for id in ["o-1", "o-2", "o-3"] {
        let _ = orders.delete_id(id, Expect::Any).await?;
    }
    for id in ["wm-mix", "wm-fill"] {
        let _ = masters.delete_id(id, Expect::Any).await?;
    }

    println!("\n## Writes (each one generated Lua script: document, indexes, change entry, scope, nudge)\n");
    for (id, name) in [("wm-mix", "Mix"), ("wm-fill", "Fill")] {
        let wm = WorkMaster { id: id.into(), scope: scope.into(), name: name.into() };
        show(&format!("create work master {id}"), masters.create(&wm).await?);
    }
    for (id, priority, wm) in [("o-1", 5, "wm-mix"), ("o-2", 1, "wm-fill"), ("o-3", 3, "wm-mix")] {
        let o = JobOrder { id: id.into(), scope: scope.into(), priority, work_master: wm.into() };
        show(&format!("create job order {id} (priority {priority})"), orders.create(&o).await?);
    }
    let r1 = JobResponse {
        id: "r-1".into(),
        scope: scope.into(),
        job_order_id: "o-1".into(),
        start_time: 1_700_000_000_000,
        state: vec!["Idle".into()],
    };
    show("create job response r-1 for o-1 [Idle]", responses.create(&r1).await?);
    let r2 = JobResponse {
        id: "r-2".into(),
        scope: scope.into(),
        job_order_id: "o-2".into(),
        start_time: 1_700_000_060_000,
        state: vec!["Running".into()],
    };
    show("create job response r-2 for o-2 [Running]", responses.create(&r2).await?);

    let mut read = responses.get("r-1").await?.ok_or("r-1 missing")?;
    let stale = read.clone();
    for state in [vec!["Running"], vec!["Running", "Held"], vec!["Complete"]] {
        let next = JobResponse { state: state.iter().map(|s| (*s).to_owned()).collect(), ..read.doc.clone() };
        let out = responses.update_in_place(&mut read, next).await?;
        show(&format!("update r-1 state -> {state:?}"), out);
    }
    let stale_next = JobResponse { state: vec!["Aborted".into()], ..stale.doc.clone() };
    show("update r-1 from a stale read (version 1)", responses.update(&stale, &stale_next).await?);

    println!("\n## Reads through every index\n");
    let got = responses.get("r-1").await?.ok_or("r-1 missing")?;
    println!("  get r-1                          -> version {}, state {:?}", got.version, got.doc.state);
    for order in ["o-1", "o-2", "o-3"] {
        let found = responses.find(JobResponse::by_order(order)).await?;
        println!("  job response by order {order}       -> {:?}", found.map(|s| s.id));
    }
    for state in ["Running", "Running_Held", "Complete"] {
        let ids = responses.ids(JobResponse::by_state(scope, state), Page::first(1000)).await?;
        println!("  job responses in {scope} by state {state:<13}-> {:?}", ids.ids);
    }
    println!("  job responses in {scope} by start time   -> {:?}", responses.list(scope, Page::first(100)).await?.ids);
    println!("  job orders in {scope} by priority        -> {:?}", orders.list(scope, Page::first(100)).await?.ids);
    let mut wms = masters.list(scope, Page::first(100)).await?.ids;
    wms.sort();
    println!("  work masters in {scope}                  -> {wms:?}");

    let o3 = orders.get("o-3").await?.ok_or("o-3 missing")?;
    println!("  delete job order o-3                  -> {:?}", orders.delete(&o3).await?);
    println!("  job orders in {scope} by priority        -> {:?}", orders.list(scope, Page::first(100)).await?.ids);

    let mut con = valkey.connection();
    let prefix = valkey.prefix().as_str();
    let changes: usize = redis::cmd("XLEN").arg(format!("{prefix}:changes:{scope}")).query_async(&mut con).await?;
    let scopes: Vec<String> = redis::cmd("SMEMBERS").arg(format!("{prefix}:scopes")).query_async(&mut con).await?;
    println!("  change entries in {scope}               -> {changes}");
    println!("  scope registry                        -> {scopes:?}");
    Ok(())
}
