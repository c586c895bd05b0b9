//! The plant binary under the generated ACL users, and its generated key
//! table against the committed one.

use std::process::Command;

use microdcs_valkey::redis;
use microdcs_valkey::testing::{ValkeyServer, unique_prefix};

const PASSWORD: &str = "roles-test-password-1";

fn plant(url: &str, prefix: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_plant"))
        .args(args)
        .env("APP_MicroDcs__Valkey__ConnectionString", url)
        .env("APP_MicroDcs__Valkey__KeyPrefix", prefix)
        .output()
        .expect("run plant");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// Creates the user of `role` from what `plant acl` prints, with a password.
fn user(server: &ValkeyServer, prefix: &str, role: &str) -> String {
    let name = format!("{role}-user");
    let (code, line) = plant("unused:1", prefix, &["acl", "--role", role, "--user", &name]);
    assert_eq!(code, 0, "{line}");
    let line = line.trim();
    assert!(line.starts_with(&format!("ACL SETUSER {name} ")) && !line.contains(PASSWORD), "{line}");
    // The line's words as a shell reads them (the way the guide gives to
    // apply it: after `valkey-cli` on a command line).
    let out = Command::new("sh").arg("-c").arg(format!("printf '%s\\n' {line}")).output().unwrap();
    assert!(out.status.success(), "sh refused `{line}`: {}", String::from_utf8_lossy(&out.stderr));
    let out = String::from_utf8(out.stdout).unwrap();
    let mut words = out.lines();
    let mut cmd = redis::cmd(words.next().unwrap());
    for w in words {
        cmd.arg(w);
    }
    cmd.arg(format!(">{PASSWORD}"));
    let mut con = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    let () = cmd.query(&mut con).unwrap();
    format!("redis://{name}:{PASSWORD}@{}/", server.host_port())
}

#[test]
fn the_demo_runs_as_the_app_user_and_the_tools_as_theirs() {
    let server = ValkeyServer::start().unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("roles");
    let p = prefix.as_str();
    let app = user(&server, p, "app");
    let (code, out) = plant(&app, p, &[]);
    assert_eq!(code, 0, "the demo as the app user: {out}");
    assert!(!out.contains("NOPERM"), "{out}");
    assert!(out.contains("job responses in line-1 by state Complete     -> [\"r-1\"]"), "{out}");

    let maintenance = user(&server, p, "maintenance");
    let (code, out) = plant(&maintenance, p, &["verify"]);
    assert_eq!(code, 0, "verify as the maintenance user: {out}");
    let (code, out) = plant(&maintenance, p, &["rebuild"]);
    assert_eq!(code, 0, "rebuild as the maintenance user: {out}");

    let inspector = user(&server, p, "inspector");
    let (code, out) = plant(&inspector, p, &["inspect", "doc", "jobresponse", "r-1", "--json"]);
    assert_eq!(code, 0, "inspect as the inspector user: {out}");
    assert!(out.contains("\"state\": \"present\""), "{out}");
    for args in [
        &["inspect", "kinds"][..],
        &["inspect", "scopes", "jobresponse"],
        &["inspect", "ids", "joborder", "line-1"],
        &["inspect", "stream", "jobresponse", "line-1"],
    ] {
        let (code, out) = plant(&inspector, p, args);
        assert_eq!(code, 0, "{args:?}: {out}");
    }
    // The inspector cannot run the demo's writes.
    let (code, out) = plant(&inspector, p, &[]);
    assert_ne!(code, 0);
    assert!(out.contains("no permissions"), "refused by the ACL: {out}");
}

#[test]
fn the_committed_key_table_is_the_generated_one() {
    let (code, generated) = plant("unused:1", "microdcs", &["keyspace"]);
    assert_eq!(code, 0, "{generated}");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/keyspace.md");
    if std::env::var_os("BLESS").is_some_and(|v| v != "0") {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        committed, generated,
        "docs/keyspace.md differs from `plant keyspace`; after an intended change run \
         `BLESS=1 cargo test -p microdcs-examples --test it roles`"
    );
}
