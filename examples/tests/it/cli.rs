//! The plant binary end to end: demo, `verify` (exit 1 on differences, a
//! summary table), `rebuild`, `verify` clean.

use std::process::Command;

use microdcs_valkey::testing::{ValkeyServer, unique_prefix};

fn plant(server: &ValkeyServer, prefix: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_plant"))
        .args(args)
        .env("APP_MicroDcs__Valkey__ConnectionString", server.host_port())
        .env("APP_MicroDcs__Valkey__KeyPrefix", prefix)
        .output()
        .expect("run plant");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn demo_verify_rebuild() {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("cli");
    let p = prefix.as_str();
    let (code, out) = plant(&server, p, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("job responses in line-1 by state Complete     -> [\"r-1\"]"), "{out}");
    // The recipe: the timer fired by the sweep, the event applied once, the
    // worker took each step's work, the finished job left every index.
    for line in [
        "timer fired in line-1: mix -> qc (sweep)       -> written, version 2",
        "event qc-1 delivered: qc -> pack               -> written, version 3",
        "step pack -> done (worker)                     -> written, version 4",
        "event qc-1 redelivered                         -> already applied by j-recipe-1: nothing written",
        "worker took work of j-recipe-1 v4 in line-1: finished done",
        "job j-recipe-1 finished: in due false, active false, waits false",
        "recipe read back by digest, verified           -> true",
    ] {
        assert!(out.contains(line), "missing `{line}`:\n{out}");
    }
    // Again against the same server: the demo starts clean.
    let (code, again) = plant(&server, p, &[]);
    assert_eq!(code, 0, "{again}");
    assert!(again.contains("event qc-1 delivered: qc -> pack               -> written, version"), "{again}");
    assert!(again.contains("job j-recipe-1 finished: in due false, active false, waits false"), "{again}");

    let (code, out) = plant(&server, p, &["verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("| (all) | (all) | none | 0 |"), "{out}");

    // Damage: r-1 disappears from its by-state set; a ghost joins a job order list.
    let mut con = std::net::TcpStream::connect(server.host_port()).unwrap();
    use std::io::{Read, Write};
    let cmd = format!("SREM {p}:jobresponse:bystate:line-1:Complete r-1\r\nZADD {p}:joborder:list:line-1 9 ghost\r\n");
    con.write_all(cmd.as_bytes()).unwrap();
    let mut buf = [0u8; 64];
    let _ = con.read(&mut buf).unwrap();

    let (code, out) = plant(&server, p, &["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("| jobresponse | by_state | missing | 1 |"), "{out}");
    assert!(out.contains("| joborder | list | orphan | 1 |"), "{out}");

    let (code, out) = plant(&server, p, &["verify", "--kind", "workmaster"]);
    assert_eq!(code, 0, "{out}");

    let (_, out) = plant(&server, p, &["rebuild"]);
    assert!(out.contains("fixed 2 entries"), "{out}");
    let (code, out) = plant(&server, p, &["verify"]);
    assert_eq!(code, 0, "{out}");

    let (code, out) = plant(&server, p, &["verify", "--kind", "nonsense"]);
    assert_eq!(code, 2, "{out}");
}

#[test]
fn the_miroir_program_runs_end_to_end() {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_miroir"))
        .env("APP_MicroDcs__Valkey__ConnectionString", server.host_port())
        .output()
        .expect("run miroir");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    for line in [
        "tasks in the index set                -> [\"t-0\", \"t-1\", \"t-2\", \"t-3\", \"t-4\"]",
        "idempotency key req-1 stored again    -> false",
        "revocation received                   -> Some(\"admin-1\")",
        "verify tasks                          -> 5 documents, clean: true",
        "task t-0 scope                        -> Some(\"_\")",
    ] {
        assert!(text.contains(line), "missing `{line}`:\n{text}");
    }
    assert_eq!(text.matches("claimed job").count(), 3, "{text}");
}

/// `--metrics-addr` serves the runtime's metrics while the demo runs and,
/// with `--linger`, after it: the documented names, labels, a histogram and
/// the poller's gauges.
#[test]
fn the_demo_serves_its_metrics_for_a_scrape() {
    use std::io::{BufRead, BufReader, Read, Write};
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("cli-metrics");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_plant"))
        .args(["--metrics-addr", &format!("127.0.0.1:{port}"), "--linger", "30"])
        .env("APP_MicroDcs__Valkey__ConnectionString", server.host_port())
        .env("APP_MicroDcs__Valkey__KeyPrefix", prefix.as_str())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run plant");
    // Wait until the demo is done and lingers.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    loop {
        let line = lines.next().expect("the demo ends by lingering").unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.starts_with("Serving metrics for 30 s more") {
            break;
        }
    }
    assert!(seen.contains(&format!("Metrics: http://127.0.0.1:{port}/metrics")), "{seen}");
    let page = {
        let mut con = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        // One request: the server closes the connection after its answer.
        write!(con, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut body = String::new();
        con.read_to_string(&mut body).unwrap();
        body
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    for expected in [
        "# TYPE db_client_operation_duration_seconds histogram",
        "# TYPE microdcs_valkey_operations_total counter",
        "db_system_name=\"valkey\"",
        "db_operation_name=\"create\"",
        "microdcs_target=\"jobresponse\"",
        "microdcs_outcome=\"written\"",
        "le=\"+Inf\"",
        "db_client_operation_duration_seconds_count{",
        // The poller's gauges, sampled while the recipe runs.
        "# TYPE microdcs_valkey_poller_lag gauge",
        "# TYPE microdcs_valkey_poller_pending gauge",
        "microdcs_valkey_poller_pending{",
    ] {
        assert!(page.contains(expected), "missing `{expected}` in the scrape:\n{page}");
    }
    // No id or key in any label.
    assert!(!page.contains(prefix.as_str()), "a key reached a label");
}

/// `plant mcp` speaks the Model Context Protocol on stdin/stdout (nothing
/// else on stdout) and ends when its input does.
#[test]
fn plant_mcp_answers_on_stdio() {
    use std::io::{BufRead, BufReader, Write};
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("cli-mcp");
    let mut child = Command::new(env!("CARGO_BIN_EXE_plant"))
        .arg("mcp")
        .env("APP_MicroDcs__Valkey__ConnectionString", server.host_port())
        .env("APP_MicroDcs__Valkey__KeyPrefix", prefix.as_str())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run plant mcp");
    let mut input = child.stdin.take().unwrap();
    writeln!(input, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18"}}}}"#)
        .unwrap();
    writeln!(input, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
    writeln!(input, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"kinds","arguments":{{}}}}}}"#)
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("an answer").unwrap();
    assert!(first.contains(r#""id":1"#) && first.contains("2025-06-18"), "{first}");
    let second = lines.next().expect("an answer").unwrap();
    assert!(second.contains(r#""id":2"#) && second.contains("jobresponse"), "{second}");
    drop(input);
    assert!(lines.next().is_none(), "nothing but answers on stdout");
    assert!(child.wait().unwrap().success());
}

#[test]
fn rust_log_shows_the_operation_spans_on_stderr() {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("cli-log");
    let out = Command::new(env!("CARGO_BIN_EXE_plant"))
        .env("APP_MicroDcs__Valkey__ConnectionString", server.host_port())
        .env("APP_MicroDcs__Valkey__KeyPrefix", prefix.as_str())
        .env("RUST_LOG", "microdcs_valkey=info")
        .output()
        .expect("run plant");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    // One line per finished operation, with its attributes and outcome.
    let closed: Vec<&str> = stderr.lines().filter(|l| l.contains("microdcs.valkey") && l.contains("close")).collect();
    assert!(
        closed.iter().any(|l| l.contains("db.operation.name=\"create\"") || l.contains("db.operation.name=create")),
        "{stderr}"
    );
    assert!(closed.iter().any(|l| l.contains("microdcs.outcome")), "{stderr}");
    // The filter applies: nothing below `info` and nothing of other crates.
    assert!(!stderr.contains("DEBUG"), "{stderr}");
    // Standard output is the demo's, as without the variable.
    assert!(!stdout.contains("microdcs.valkey"), "{stdout}");
}
