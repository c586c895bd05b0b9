//! The main demo: the plant keyspace (our reference keyspace) against a real Valkey.
//!
//! Connects to `APP_MicroDcs__Valkey__ConnectionString` when set, otherwise
//! starts its own `valkey-server` through the test harness. Prints the key
//! table, then writes job orders, job responses (with state changes) and work
//! masters and reads them back through every index.
//!
//! Every other command is the admin tool of the plant keyspace
//! (`microdcs_valkey::admin`): `plant verify`, `rebuild`, `inspect`, `mcp`,
//! `keys` (or `keyspace`), `acl`, `lock` and `migrate ...` (exit code 1 when
//! differences were found). On a server it starts itself, the demo's
//! documents are written first so there is something to look at.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use microdcs_examples::plant::{Plant, RefKind};
use microdcs_valkey::store::DeleteExpect;

use microdcs_examples::plant::{JobOrder, JobResponse, WorkMaster, key_table};
use microdcs_valkey::redis;
use microdcs_valkey::testing::ValkeyServer;
use microdcs_valkey::{MicroDcsConfig, Page, PutOutcome, Valkey, inspect::Inspector};

/// The plant demo, and the admin tool of its keyspace.
#[derive(Parser)]
#[command(
    name = "plant",
    about = "The plant keyspace on Valkey: the demo, and the admin tool (verify, rebuild, inspect, mcp, keys, acl, lock, migrate)"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Serve the runtime's metrics in the Prometheus text format at
    /// `http://ADDR/metrics` while the program runs (`127.0.0.1:9464`).
    #[arg(long, global = true, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Keep running this many seconds after the work is done, so the
    /// metrics can be scraped.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 0)]
    linger: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Run the plant keyspace sharded by scope (`ShardedPlant`): writes in
    /// six scopes with each one's slot, a lookup, a step, the registry and
    /// a verify. On a cluster, with `APP_MicroDcs__Valkey__Placement=sharded`
    /// and an untagged prefix.
    Sharded,
    /// A command of the admin tool (`microdcs_valkey::admin`).
    #[command(external_subcommand)]
    Admin(Vec<String>),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    microdcs_examples::logging::init_from_env();
    let cli = Cli::parse();
    let served = match cli.metrics_addr {
        Some(addr) => match microdcs_examples::prometheus::install(addr) {
            Ok(()) => {
                println!("Metrics: http://{addr}/metrics");
                Some(addr)
            }
            Err(e) => {
                eprintln!("plant: --metrics-addr {addr}: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let outcome = run(cli.command).await;
    if served.is_some() && cli.linger > 0 {
        println!("Serving metrics for {} s more", cli.linger);
        tokio::time::sleep(std::time::Duration::from_secs(cli.linger)).await;
    }
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("plant: {e}");
            ExitCode::from(2)
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

async fn run(command: Option<Command>) -> Res<ExitCode> {
    // Pure: from the spec and the configured prefix only.
    if let Some(Command::Admin(args)) = &command
        && microdcs_valkey::admin::is_offline(args)?
    {
        let prefix = MicroDcsConfig::from_env()?.valkey.prefix()?;
        let ran = microdcs_valkey::admin::run_offline::<Plant>(&prefix, args)?;
        print!("{}", ran.output);
        return Ok(ExitCode::from(ran.code));
    }
    // Configuration from the environment (`APP_MicroDcs__Valkey__*`); without
    // a connection string the demo starts its own server.
    let mut config = MicroDcsConfig::from_env()?;
    // The MCP server's stdout carries its protocol only: talk on stderr.
    let mcp = matches!(&command, Some(Command::Admin(a)) if a.first().map(String::as_str) == Some("mcp"));
    let say = |text: String| if mcp { eprintln!("{text}") } else { println!("{text}") };
    let _server = if std::env::var_os("APP_MicroDcs__Valkey__ConnectionString").is_some() {
        None
    } else {
        let server = ValkeyServer::start_local(&[])?;
        say(format!("Started valkey-server on {}", server.host_port()));
        config.set("Valkey:ConnectionString", &server.host_port())?;
        Some(server)
    };
    say(format!("Configuration: {}", config.valkey));
    let valkey = Valkey::connect(&config.valkey).await?;
    if mcp {
        if _server.is_some() {
            documents(&valkey, false).await?;
        }
        let inspector = Inspector::new(&Plant::open(valkey.clone()));
        inspector.serve_mcp(tokio::io::BufReader::new(tokio::io::stdin()), tokio::io::stdout()).await?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(Command::Sharded) = command {
        for line in microdcs_examples::plant::sharded::demo(&valkey).await? {
            say(line);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(Command::Admin(args)) = command {
        if _server.is_some() {
            // A fresh server: write the demo documents so there is something to look at.
            documents(&valkey, false).await?;
        }
        let ran = microdcs_valkey::admin::run::<Plant>(&valkey, &args).await?;
        print!("{}", ran.output);
        return Ok(ExitCode::from(ran.code));
    }
    let prefix = valkey.prefix().clone();
    // `HELLO` answers with the server's name and version, and is among the
    // commands the `app` ACL role grants (`INFO` is not).
    let mut con = valkey.connection();
    let hello: std::collections::HashMap<String, redis::Value> = redis::cmd("HELLO").query_async(&mut con).await?;
    let text = |k: &str| match hello.get(k) {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(redis::Value::SimpleString(s)) => s.clone(),
        _ => "unknown".to_owned(),
    };
    println!("Connected: {} {}\n", text("server"), text("version"));

    println!("## Plant keyspace (prefix `{prefix}`)\n");
    println!("| Family | Type | Template | Key with sample values |");
    println!("|---|---|---|---|");
    for row in key_table(&prefix)? {
        // `|` would end a Markdown table cell.
        let cell = |s: &str| s.replace('|', "\\|");
        println!("| {} | {} | `{}` | `{}` |", row.family, row.key_type, cell(row.template), cell(&row.key));
    }

    documents(&valkey, true).await?;

    println!("\n## An SFC recipe through the poller (each state change one step script)\n");
    println!("  recipe: {}", microdcs_examples::recipe::RECIPE);
    let lines = microdcs_examples::recipe::run(&valkey).await.map_err(|e| -> Box<dyn std::error::Error> { e })?;
    for line in lines {
        println!("  {line}");
    }
    Ok(ExitCode::SUCCESS)
}

fn show(out: &mut String, what: &str, outcome: PutOutcome) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "  {what:<52} -> {outcome:?}");
}

async fn documents(valkey: &Valkey, verbose: bool) -> Res<()> {
    use std::fmt::Write as _;
    let mut out = String::new();
    let scope = "line-1";
    let plant = Plant::open(valkey.clone());
    let masters = plant.store::<WorkMaster>();
    let orders = plant.store::<JobOrder>();
    let responses = plant.store::<JobResponse>();
    // Start clean so the demo can run again against the same server.
    for id in ["r-1", "r-2"] {
        let _ = responses.delete_id(id, DeleteExpect::Any).await?;
    }
    for id in ["o-1", "o-2", "o-3"] {
        let _ = orders.delete_id(id, DeleteExpect::Any).await?;
    }
    for id in ["wm-mix", "wm-fill"] {
        let _ = masters.delete_id(id, DeleteExpect::Any).await?;
    }

    let _ =
        writeln!(out, "\n## Writes (each one generated Lua script: document, indexes, change entry, scope, nudge)\n");
    for (id, name) in [("wm-mix", "Mix"), ("wm-fill", "Fill")] {
        let wm = WorkMaster { id: id.into(), scope: scope.into(), name: name.into() };
        show(&mut out, &format!("create work master {id}"), masters.create(&wm).await?);
    }
    for (id, priority, wm) in [("o-1", 5, "wm-mix"), ("o-2", 1, "wm-fill"), ("o-3", 3, "wm-mix")] {
        let o = JobOrder { id: id.into(), scope: scope.into(), priority, work_master: wm.into() };
        show(&mut out, &format!("create job order {id} (priority {priority})"), orders.create(&o).await?);
    }
    let r1 = JobResponse {
        start_time: 1_700_000_000_000,
        data: "setpoint=42".into(),
        ..JobResponse::new("r-1", scope, "o-1", &["Idle"])
    };
    show(&mut out, "create job response r-1 for o-1 [Idle]", responses.create(&r1).await?);
    let r2 = JobResponse { start_time: 1_700_000_060_000, ..JobResponse::new("r-2", scope, "o-2", &["Running"]) };
    show(&mut out, "create job response r-2 for o-2 [Running]", responses.create(&r2).await?);

    let mut read = responses.get("r-1").await?.ok_or("r-1 missing")?;
    let stale = read.clone();
    for state in [vec!["Running"], vec!["Running", "Held"], vec!["Complete"]] {
        let next = JobResponse { state: state.iter().map(|s| (*s).to_owned()).collect(), ..read.doc.clone() };
        let outcome = responses.update_in_place(&mut read, next).await?;
        show(&mut out, &format!("update r-1 state -> {state:?}"), outcome);
    }
    let stale_next = JobResponse { state: vec!["Aborted".into()], ..stale.doc.clone() };
    show(&mut out, "update r-1 from a stale read (version 1)", responses.update(&stale, &stale_next).await?);

    let _ = writeln!(out, "\n## Reads through every index\n");
    let got = responses.get("r-1").await?.ok_or("r-1 missing")?;
    let _ = writeln!(out, "  get r-1                          -> version {}, state {:?}", got.version, got.doc.state);
    for order in ["o-1", "o-2", "o-3"] {
        let found = responses.find(JobResponse::by_order(order)).await?;
        let _ = writeln!(out, "  job response by order {order}       -> {:?}", found.map(|s| s.id));
    }
    for state in ["Running", "Running_Held", "Complete"] {
        let ids = responses.ids(JobResponse::by_state(scope, state), Page::first(1000)).await?;
        let _ = writeln!(out, "  job responses in {scope} by state {state:<13}-> {:?}", ids.ids);
    }
    let _ = writeln!(
        out,
        "  job responses in {scope} by start time   -> {:?}",
        responses.list(scope, Page::first(100)).await?.ids
    );
    let _ = writeln!(
        out,
        "  job orders in {scope} by priority        -> {:?}",
        orders.list(scope, Page::first(100)).await?.ids
    );
    let mut wms = masters.list(scope, Page::first(100)).await?.ids;
    wms.sort();
    let _ = writeln!(out, "  work masters in {scope}                  -> {wms:?}");

    let o3 = orders.get("o-3").await?.ok_or("o-3 missing")?;
    let _ = writeln!(out, "  delete job order o-3                  -> {:?}", orders.delete(&o3).await?);
    let _ = writeln!(
        out,
        "  job orders in {scope} by priority        -> {:?}",
        orders.list(scope, Page::first(100)).await?.ids
    );

    let _ = writeln!(out, "\n## Other families (typed operations, one round trip each)\n");
    let refs = Plant::reference(&plant, &RefKind::Equipment.segment(), scope)?;
    refs.add(&["press-1", "press-2"]).await?;
    let mut referenced = refs.members(Page::first(100)).await?.ids;
    referenced.sort();
    let _ = writeln!(out, "  equipment referenced in {scope}        -> {referenced:?}");
    let acceptance = Plant::job_acceptance(&plant, scope)?;
    acceptance.set(&10, None).await?;
    let _ = writeln!(out, "  job acceptance limit in {scope}        -> {:?}", acceptance.get().await?);
    let seq = Plant::pubseq(&plant, scope)?.increment(1).await?;
    let _ = writeln!(out, "  next publish sequence in {scope}       -> {seq}");
    let cursors = Plant::publisher_cursors(&plant)?;
    cursors.set(scope, &seq.to_string()).await?;
    let _ = writeln!(out, "  publisher cursor of {scope}            -> {:?}", cursors.get(scope).await?);

    let scopes = Plant::scopes(&plant)?.members(Page::first(100)).await?.ids;
    let _ = writeln!(out, "  scope registry                        -> {scopes:?}");
    if verbose {
        print!("{out}");
    }
    Ok(())
}
