//! The runtime on a Valkey Cluster of three primaries and three replicas:
//! connecting by several endpoints (or one node), the island as one hash
//! tag, every operation of the application and of maintenance, keyspace
//! walks on the island's node, slots computed like the server's, and the
//! prefix rules.
//!
//! One cluster serves the whole binary (about 2.5 s to form), so the
//! scenarios run in one test, in order, each under its own prefix, and the
//! cluster is killed when the test ends, also when it fails.

use std::time::Duration;

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::flows::{app_flow, maintenance_flow};
use microdcs_valkey::acl::AclRole;
use microdcs_valkey::config::Secret;
use microdcs_valkey::redis::cluster_routing::Slot;
use microdcs_valkey::testing::{ValkeyCluster, command, unique_island, unique_prefix};
use microdcs_valkey::{
    Expect, MicroDcsConfig, Page, PutOutcome, Valkey, client::ConnectError, config::ValkeyConfig, inspect::Inspector,
    store::MaintenanceOptions,
};

fn config(cluster: &ValkeyCluster, prefix: &str) -> ValkeyConfig {
    ValkeyConfig {
        connection_string: Secret::new(cluster.connection_string()),
        key_prefix: prefix.to_owned(),
        ..MicroDcsConfig::default().valkey
    }
}

async fn connect(cluster: &ValkeyCluster, name: &str) -> Valkey {
    let prefix = unique_island(name);
    Valkey::connect(&config(cluster, prefix.as_str())).await.unwrap_or_else(|e| panic!("connect {name}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_on_a_cluster() {
    // One node holding every slot already refuses a script whose keys
    // span slots: the cheapest proof that every generated call stays in one.
    let single = ValkeyCluster::start_local(1, 0).unwrap_or_else(|e| panic!("{e}"));
    everything_the_application_does(&single).await;
    scripts_go_with_their_first_line(&single).await;
    island_calls_go_straight_to_their_primary(&single).await;
    drop(single);

    let cluster = ValkeyCluster::start(3, 1).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("cluster of 6 nodes formed in {:?}", cluster.formed_in());

    everything_the_application_does(&cluster).await;
    one_endpoint_finds_the_cluster(&cluster).await;
    prefixes_without_one_tag_are_refused(&cluster).await;
    slots_agree_with_the_server(&cluster).await;
    walks_see_the_whole_island(&cluster).await;
    islands_spread_over_primaries(&cluster).await;
    pipelines_and_one_shot_commands(&cluster).await;
    roles_applied_on_every_node(&cluster).await;
    island_calls_go_straight_to_their_primary(&cluster).await;
    island_calls_follow_a_failover(&cluster).await;
}

/// The calls of `INFO commandstats` of `node`, by command.
fn calls(node: &microdcs_valkey::testing::ValkeyServer) -> std::collections::BTreeMap<String, u64> {
    let text = command(node, &["INFO", "commandstats"]).unwrap();
    text.split(['\r', '\n', '"'])
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|f| f.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// An island's calls (put, get, step) go straight to the primary of its
/// slot, one command each, as on one server: not handed to the cluster
/// client's routing task and on from there, two task hops each way that
/// were the whole extra cost of a cluster call (BENCHMARKS.md). Commands of
/// no island slot keep the cluster client's routing: a script load still
/// reaches every primary.
async fn island_calls_go_straight_to_their_primary(cluster: &ValkeyCluster) {
    use microdcs_tests::fixtures::SfcState;
    use microdcs_valkey::store::{Effects, WorkEntry};
    use microdcs_valkey::testing::direct_answers;
    let valkey = connect(cluster, "cl-direct").await;
    let slot = valkey.prefix().slot().expect("an island");
    let node = &cluster.nodes()[cluster.primary_of(slot).expect("the slot is served")];
    let plant = Plant::open(valkey.clone());
    let (responses, states) = (plant.store::<JobResponse>(), plant.store::<SfcState>());
    let effects = Effects::new().work(WorkEntry::new().field("step", "mix"));
    let job = |i: usize| SfcState {
        job_id: format!("j-{i}"),
        scope: "s1".into(),
        step: "mix".into(),
        deadline: None,
        running: true,
        wait_type: None,
        wait_start: None,
    };
    // Loads the scripts once, before counting.
    let r = JobResponse::new("r-0", "s1", "o-0", &["Queued"]);
    let _ = responses.put(&r, Expect::Any).await.unwrap();
    let _ = states.step(None, &job(0), &effects).await.unwrap();
    let (direct_before, before) = (direct_answers(&valkey), calls(node));
    const N: usize = 20;
    for i in 1..=N {
        let r = JobResponse::new(&format!("r-{i}"), "s1", &format!("o-{i}"), &["Queued"]);
        let _ = responses.put(&r, Expect::Any).await.unwrap();
        assert!(responses.get(&r.id).await.unwrap().is_some());
        let _ = states.step(None, &job(i), &effects).await.unwrap();
    }
    let after = calls(node);
    let grew = |c: &str| after.get(c).copied().unwrap_or(0) - before.get(c).copied().unwrap_or(0);
    assert_eq!((grew("evalsha"), grew("hgetall")), (2 * N as u64, N as u64), "one command per call");
    let all: Vec<_> = after.keys().map(|c| (c.clone(), grew(c))).filter(|(_, n)| *n > 0).collect();
    // A put with `Expect::Any` reads the index fields first (`HMGET`), as
    // on one server: four commands a round, every one straight there.
    assert_eq!(direct_answers(&valkey) - direct_before, 4 * N as u64, "every call straight to the primary: {all:?}");
    // A script load goes to every primary, through the cluster client.
    let primaries: Vec<_> = (0..cluster.nodes().len()).filter(|&i| cluster.is_primary(i)).collect();
    for &i in &primaries {
        command(&cluster.nodes()[i], &["SCRIPT", "FLUSH"]).unwrap();
    }
    let r = JobResponse::new("r-load", "s1", "o-load", &["Queued"]);
    let _ = responses.put(&r, Expect::Any).await.unwrap();
    let sha = microdcs_valkey::redis::Script::new(&format!(
        "#!lua\n{}",
        <JobResponse as microdcs_valkey::Document>::PUT_SCRIPT
    ))
    .get_hash()
    .to_owned();
    for &i in &primaries {
        assert_eq!(command(&cluster.nodes()[i], &["SCRIPT", "EXISTS", &sha]).unwrap(), "array([int(1)])", "node {i}");
    }
}

/// After a failover of the island's shard the calls go on (the direct
/// connection's `MOVED` or `READONLY` sends them through the cluster
/// client, which follows it) and return to the new primary directly.
async fn island_calls_follow_a_failover(cluster: &ValkeyCluster) {
    use microdcs_valkey::testing::direct_answers;
    let valkey = connect(cluster, "cl-direct-fo").await;
    let slot = valkey.prefix().slot().expect("an island");
    let primary = cluster.primary_of(slot).expect("the slot is served");
    let replica = cluster.replica_of(primary).expect("3+3 has a replica per primary");
    let responses = Plant::open(valkey.clone()).store::<JobResponse>();
    let put = |i: usize| {
        let responses = responses.clone();
        async move {
            let r = JobResponse::new(&format!("f-{i}"), "s1", &format!("fo-{i}"), &["Queued"]);
            let _ = responses.put(&r, Expect::Any).await.unwrap_or_else(|e| panic!("put {i}: {e}"));
        }
    };
    put(0).await;
    let direct = direct_answers(&valkey);
    assert!(direct > 0, "straight to the primary before the failover");
    cluster.failover(replica).unwrap_or_else(|e| panic!("{e}"));
    // The direct connection is looked for again at most once a second:
    // writes go on meanwhile, and go straight to the new primary after.
    let mut i = 1;
    while direct_answers(&valkey) <= direct {
        put(i).await;
        i += 1;
        assert!(i < 400, "calls never went straight to the new primary");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let node = &cluster.nodes()[replica];
    let before = calls(node).get("evalsha").copied().unwrap_or(0);
    put(i + 1).await;
    assert_eq!(calls(node).get("evalsha").copied().unwrap_or(0), before + 1, "the new primary ran the write");
}

async fn scripts_go_with_their_first_line(cluster: &ValkeyCluster) {
    use microdcs_valkey::Document;
    use microdcs_valkey::redis::Script;
    let node = &cluster.nodes()[0];
    let valkey = connect(cluster, "cl-lua").await;
    let responses = Plant::open(valkey).store::<JobResponse>();
    let r = JobResponse::new("r-1", "s1", "o-1", &["Running"]);
    assert!(matches!(responses.put(&r, Expect::Create).await.unwrap(), PutOutcome::Written { version: 1 }));
    assert!(responses.find(JobResponse::by_order("o-1")).await.unwrap().is_some());
    // What the server cached is the text with its first line: a write
    // script plain, the lookup marked read-only; never the bare text.
    let sha = |text: String| Script::new(&text).get_hash().to_owned();
    let cached = |sha: String| command(node, &["SCRIPT", "EXISTS", &sha]).unwrap();
    assert_eq!(cached(sha(format!("#!lua\n{}", JobResponse::PUT_SCRIPT))), "array([int(1)])");
    assert_eq!(cached(sha(format!("#!lua flags=no-writes\n{}", JobResponse::FIND_SCRIPT))), "array([int(1)])");
    assert_eq!(cached(sha(JobResponse::PUT_SCRIPT.to_owned())), "array([int(0)])");
    // And the line is what makes the server refuse a key of another slot
    // that the script did not declare; the same body without it runs.
    let body = "redis.call('SET', KEYS[1], '1') return redis.call('SET', 'cl-lua-other', '1')";
    let with_line = command(node, &["EVAL", &format!("#!lua\n{body}"), "1", "{cl-lua}k"]);
    assert!(with_line.as_ref().is_err_and(|e| e.to_string().contains("do not hash to the same slot")), "{with_line:?}");
    assert!(command(node, &["EVAL", body, "1", "{cl-lua}k"]).is_ok());
}

async fn roles_applied_on_every_node(cluster: &ValkeyCluster) {
    // ACL users are per node: the guide (chapter 4) says to apply each role's rules
    // on every node. Done so, the restricted users run everything.
    let prefix = unique_island("cl-acl");
    let password = "cluster-acl-password-1";
    for (role, user) in [(AclRole::App, "cl-app"), (AclRole::Maintenance, "cl-maint")] {
        let rules = role.rules(&prefix);
        let pass = format!(">{password}");
        let mut args = vec!["ACL", "SETUSER", user];
        args.extend(rules.iter().map(String::as_str));
        args.push(&pass);
        for node in cluster.nodes() {
            command(node, &args).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let as_user = |user: &str| ValkeyConfig {
        connection_string: Secret::new(format!("{},user={user},password={password}", cluster.connection_string())),
        key_prefix: prefix.as_str().to_owned(),
        ..MicroDcsConfig::default().valkey
    };
    let app = Valkey::connect(&as_user("cl-app")).await.unwrap_or_else(|e| panic!("the app user: {e}"));
    app_flow(&app).await.unwrap_or_else(|e| panic!("the application flow as the app user on a cluster: {e}"));
    let maint = Valkey::connect(&as_user("cl-maint")).await.unwrap_or_else(|e| panic!("the maintenance user: {e}"));
    maintenance_flow(&maint).await.unwrap_or_else(|e| panic!("the maintenance flow as its user on a cluster: {e}"));
}

async fn everything_the_application_does(cluster: &ValkeyCluster) {
    let valkey = connect(cluster, "cl-app").await;
    assert!(valkey.is_cluster(), "several endpoints give a cluster connection");
    app_flow(&valkey).await.unwrap_or_else(|e| panic!("the application flow on a cluster: {e}"));
    maintenance_flow(&valkey).await.unwrap_or_else(|e| panic!("the maintenance flow on a cluster: {e}"));
    let plant = Plant::open(valkey.clone());
    let report = plant.store::<JobResponse>().verify(&MaintenanceOptions::default()).await.unwrap();
    assert!(report.is_clean(), "verify after the flows: {report:?}");
    assert!(report.documents > 0, "verify walked the island's documents: {report:?}");
    // The inspector reads through the same connection.
    let inspector = Inspector::new(&plant);
    let page = inspector.ids("jobresponse", "s1", 0, 100).await.unwrap();
    assert!(page.ids.contains(&"r-1".to_owned()), "{page:?}");
    let view = inspector.document("jobresponse", "r-1").await.unwrap().expect("r-1 is stored");
    assert!(view.version.is_some(), "{view:?}");
    let changes = inspector.changes("jobresponse", "s1").await.unwrap();
    assert!(changes.length > 0, "{changes:?}");
}

async fn one_endpoint_finds_the_cluster(cluster: &ValkeyCluster) {
    // Any one node, a replica included: it reports cluster mode.
    let replica = &cluster.nodes()[3];
    let prefix = unique_island("cl-one");
    let config = ValkeyConfig {
        connection_string: Secret::new(replica.host_port()),
        key_prefix: prefix.as_str().to_owned(),
        ..MicroDcsConfig::default().valkey
    };
    let valkey = Valkey::connect(&config).await.unwrap();
    assert!(valkey.is_cluster(), "one node in cluster mode gives a cluster connection");
    let responses = Plant::open(valkey).store::<JobResponse>();
    let r = JobResponse::new("r-1", "s1", "o-1", &["Queued"]);
    assert!(matches!(responses.create(&r).await.unwrap(), PutOutcome::Written { version: 1 }));
    assert_eq!(responses.get("r-1").await.unwrap().unwrap().doc, r);
}

async fn prefixes_without_one_tag_are_refused(cluster: &ValkeyCluster) {
    let plain = unique_prefix("cl-plain");
    match Valkey::connect(&config(cluster, plain.as_str())).await {
        Err(ConnectError::Config(e)) => {
            let text = e.to_string();
            assert!(text.contains("KeyPrefix") && text.contains("hash tag"), "{text}");
            assert!(text.contains(&format!("{{{plain}}}")), "the fix is named: {text}");
        }
        other => panic!("an untagged prefix on a cluster must be refused, got {other:?}"),
    }
    // Braces other than one tag are refused before any connection.
    for bad in ["{a}{b}", "a}b", "{}x"] {
        assert!(matches!(Valkey::connect(&config(cluster, bad)).await, Err(ConnectError::Config(_))), "{bad}");
    }
    // A database other than 0 does not exist on a cluster.
    let mut with_db = config(cluster, unique_island("cl-db").as_str());
    with_db.connection_string = Secret::new(format!("{},defaultDatabase=2", cluster.connection_string()));
    match Valkey::connect(&with_db).await {
        Err(ConnectError::Config(e)) => assert!(e.to_string().contains("database 0"), "{e}"),
        other => panic!("defaultDatabase=2 on a cluster must be refused, got {other:?}"),
    }
}

async fn slots_agree_with_the_server(cluster: &ValkeyCluster) {
    let node = &cluster.nodes()[0];
    let valkey = connect(cluster, "cl-slot").await;
    let prefix = valkey.prefix().clone();
    let responses = Plant::open(valkey).store::<JobResponse>();
    let keys = [
        "foo".to_owned(),
        "{s1}:x".to_owned(),
        "a{s1}b{c}".to_owned(),
        "{}s1".to_owned(),
        "{island-7}:scopes".to_owned(),
        responses.key("r-1").unwrap(),
        format!("{}:jobresponse:byorder:o-1", prefix.as_str()),
    ];
    for key in &keys {
        let server: u16 = command(node, &["CLUSTER", "KEYSLOT", key]).unwrap().parse().unwrap();
        assert_eq!(microdcs_valkey::schema::slot::key_slot(key.as_bytes()), server, "{key}");
        assert_eq!(Slot::for_key(key.as_bytes()), Slot::new(server).unwrap(), "{key}");
    }
    assert_eq!(prefix.slot(), Some(microdcs_valkey::schema::slot::key_slot(keys[5].as_bytes())));
}

async fn walks_see_the_whole_island(cluster: &ValkeyCluster) {
    let valkey = connect(cluster, "cl-walk").await;
    let responses = Plant::open(valkey.clone()).store::<JobResponse>();
    let docs: Vec<JobResponse> =
        (0..120).map(|i| JobResponse::new(&format!("r-{i}"), "s1", &format!("o-{i}"), &["Queued"])).collect();
    for out in responses.put_many(&docs, Expect::Create).await {
        assert!(matches!(out.unwrap(), PutOutcome::Written { .. }));
    }
    // SCAN is per node: a walk that hit a random node would see a third.
    let mut seen = Vec::new();
    let mut cursor = 0;
    loop {
        let page = responses.scan(cursor, 50).await.unwrap();
        seen.extend(page.documents.into_iter().map(|s| s.doc.id));
        match page.next {
            Some(next) => cursor = next,
            None => break,
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 120, "the walk saw every document of the island");
    let ids: Vec<String> = (0..120).map(|i| format!("r-{i}")).collect();
    let got = responses.get_many(&ids).await.unwrap();
    assert!(got.iter().all(Option::is_some), "get_many found every document");
    let listed = responses.list("s1", Page::first(200)).await.unwrap();
    assert_eq!(listed.ids.len(), 120);
}

async fn islands_spread_over_primaries(cluster: &ValkeyCluster) {
    // Islands with different tags land on different primaries; each works.
    let mut owners = std::collections::BTreeSet::new();
    for i in 0..12 {
        let prefix = unique_island(&format!("cl-spread-{i}"));
        let slot = prefix.slot().unwrap();
        owners.insert(cluster.primary_of(slot).expect("every slot has a primary"));
        if i < 3 {
            let valkey = Valkey::connect(&config(cluster, prefix.as_str())).await.unwrap();
            let responses = Plant::open(valkey).store::<JobResponse>();
            let r = JobResponse::new("r-1", "s1", "o-1", &["Queued"]);
            assert!(matches!(responses.create(&r).await.unwrap(), PutOutcome::Written { version: 1 }));
            assert!(responses.find(JobResponse::by_order("o-1")).await.unwrap().is_some());
        }
    }
    assert!(owners.len() >= 2, "12 islands all on one primary: {owners:?}");
}

async fn pipelines_and_one_shot_commands(cluster: &ValkeyCluster) {
    let valkey = connect(cluster, "cl-once").await;
    let plant = Plant::open(valkey.clone());
    let seq = Plant::pubseq(&plant, "s1").unwrap();
    for want in 1..=20 {
        assert_eq!(seq.increment(1).await.unwrap(), want, "each increment counted once");
    }
    let health = valkey.health().await;
    assert!(health.is_healthy(), "{health:?}");
    let rtt = valkey.ping().await.unwrap();
    assert!(rtt < Duration::from_secs(5));
}
