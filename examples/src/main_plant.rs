//! The main demo: the seed's plant keyspace against a real Valkey.
//!
//! Connects to `APP_MicroDcs__Valkey__ConnectionString` when set, otherwise
//! starts its own `valkey-server` through the test harness.

use std::process::ExitCode;

use microdcs_examples::plant::key_table;
use microdcs_tests::ValkeyServer;
use microdcs_valkey::KeyPrefix;
use microdcs_valkey::redis;

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

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let prefix = match std::env::var("APP_MicroDcs__Valkey__KeyPrefix") {
        Ok(p) => KeyPrefix::new(p)?,
        Err(_) => KeyPrefix::default(),
    };
    // Keep the server alive for the whole run; it is stopped on drop.
    let (url, _server) = match std::env::var("APP_MicroDcs__Valkey__ConnectionString") {
        Ok(cs) if cs.contains("://") => (cs, None),
        Ok(cs) => (format!("redis://{cs}/"), None),
        Err(_) => {
            let server = ValkeyServer::start_local(&[])?;
            println!("Started valkey-server on {}", server.host_port());
            (server.url().to_owned(), Some(server))
        }
    };
    let client = redis::Client::open(url)?;
    let mut con = client.get_multiplexed_async_connection().await?;
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
    Ok(())
}
