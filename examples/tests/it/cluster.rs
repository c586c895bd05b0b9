//! The plant and miroir programs unchanged on a Valkey Cluster: the same
//! binaries, the connection string naming the nodes and the prefix one
//! hash tag.

use std::process::Command;

use microdcs_valkey::testing::{ValkeyCluster, unique_island};

fn run(bin: &str, cluster: &ValkeyCluster, prefix: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(bin)
        .args(args)
        .env("APP_MicroDcs__Valkey__ConnectionString", cluster.connection_string())
        .env("APP_MicroDcs__Valkey__KeyPrefix", prefix)
        .output()
        .expect("run the program");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn the_programs_run_on_a_cluster() {
    let cluster = ValkeyCluster::start(3, 0).unwrap_or_else(|e| panic!("{e}"));
    let plant = env!("CARGO_BIN_EXE_plant");
    let prefix = unique_island("plant-cluster");
    let p = prefix.as_str();
    let (code, out) = run(plant, &cluster, p, &[]);
    assert_eq!(code, 0, "{out}");
    for line in [
        "job responses in line-1 by state Complete     -> [\"r-1\"]",
        "event qc-1 redelivered                         -> already applied by j-recipe-1: nothing written",
        "job j-recipe-1 finished: in due false, active false, waits false",
    ] {
        assert!(out.contains(line), "missing `{line}`:\n{out}");
    }
    let (code, out) = run(plant, &cluster, p, &["verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("| (all) | (all) | none | 0 |"), "{out}");
    let (code, out) = run(plant, &cluster, p, &["rebuild"]);
    assert_eq!(code, 0, "{out}");

    // Without a tag the program refuses to start and says how to fix it.
    let (code, out) = run(plant, &cluster, "plant-untagged", &[]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("hash tag") && out.contains("{plant-untagged}"), "{out}");

    let miroir = env!("CARGO_BIN_EXE_miroir");
    let (code, out) = run(miroir, &cluster, unique_island("miroir-cluster").as_str(), &[]);
    assert_eq!(code, 0, "{out}");
}
