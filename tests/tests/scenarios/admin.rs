//! The admin tool runs a migration end to end against a cluster of three
//! primaries with a replica each: release 1 deploys (its layouts are the
//! baseline), writes orders; release 2 (schema 2) adds an index; `migrate
//! plan` names it from the lock and the fingerprints, `status` shows it
//! building, `apply` backfills it (it becomes ready) and records its layout
//! instead of rebuilding it beside live writers, under the migration lease
//! (refused while another operator holds it), a second `apply` does
//! nothing, `verify` and `finish` are clean.

use microdcs_valkey::config::{Secret, ValkeyConfig};
use microdcs_valkey::lease::{Acquire, LeaseBackend, LeaseStore};
use microdcs_valkey::store::new_op_id;
use microdcs_valkey::testing::{ValkeyCluster, unique_island};
use microdcs_valkey::{Document, MicroDcsConfig, Page, Valkey, admin};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod release1 {
    use super::*;
    /// An order as release 1 stores it.
    #[derive(Debug, Clone, Serialize, Deserialize, Document)]
    #[microdcs(kind = "order", key = "order:{id}", list(key = "order:list:{scope}"))]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub customer: String,
    }
    microdcs_valkey::keyspace! { pub Shop { documents: [Order] } }
}

mod release2 {
    use super::*;
    /// Release 2: a field appended, an index added, schema 2.
    #[derive(Debug, Clone, Serialize, Deserialize, Document)]
    #[microdcs(kind = "order", schema = 2, key = "order:{id}", list(key = "order:list:{scope}"))]
    #[microdcs(group(name = "by_customer", key = "order:bycustomer:{scope}:{customer}"))]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub customer: String,
        #[serde(default)]
        pub gift_note: String,
    }
    microdcs_valkey::keyspace! { pub Shop { documents: [Order] } }
}

mod release3 {
    use super::*;
    /// Release 3: the index dropped, schema raised to 3.
    #[derive(Debug, Clone, Serialize, Deserialize, Document)]
    #[microdcs(kind = "order", schema = 3, key = "order:{id}", list(key = "order:list:{scope}"))]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub customer: String,
        #[serde(default)]
        pub gift_note: String,
    }
    microdcs_valkey::keyspace! { pub Shop { documents: [Order] } }
}

mod release3_unraised {
    use super::*;
    /// Release 3 as it should not be: the index dropped, the schema kept.
    #[derive(Debug, Clone, Serialize, Deserialize, Document)]
    #[microdcs(kind = "order", schema = 2, key = "order:{id}", list(key = "order:list:{scope}"))]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub customer: String,
        #[serde(default)]
        pub gift_note: String,
    }
    microdcs_valkey::keyspace! { pub Shop { documents: [Order] } }
}

/// Waits (bounded, well past a one-second `WriterLifetime`) until no
/// writer of any schema is live in the registry.
async fn writers_lapse<K: microdcs_valkey::store::EachDocument>(valkey: &Valkey) {
    for _ in 0..300 {
        let (_, v) = admin_json::<K>(valkey, &["migrate", "status"]).await;
        if v["writers"] == serde_json::json!([]) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("the writers' registry entries never lapsed");
}

async fn admin_json<K: microdcs_valkey::store::EachDocument>(valkey: &Valkey, args: &[&str]) -> (u8, Value) {
    let ran = admin::run::<K>(valkey, args.iter().copied().chain(["--json"]))
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let v = serde_json::from_str(&ran.output).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", ran.output));
    (ran.code, v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_end_to_end_on_a_cluster() {
    let cluster = ValkeyCluster::start(3, 1).unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_island("admin");
    let config = ValkeyConfig {
        connection_string: Secret::new(cluster.connection_string()),
        key_prefix: prefix.as_str().to_owned(),
        // Release 1's writers lapse a second after they stop.
        writer_heartbeat: std::time::Duration::from_millis(400),
        writer_lifetime: std::time::Duration::from_secs(1),
        ..MicroDcsConfig::default().valkey
    };
    let valkey = Valkey::connect(&config).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let lock_dir = std::env::temp_dir().join(format!("microdcs-admin-{}", std::process::id()));
    std::fs::create_dir_all(&lock_dir).unwrap();
    let lock = lock_dir.join("shop.lock");
    let lock_arg = lock.to_str().unwrap();

    // Release 1: its lock, its first deploy (nothing to rebuild), its writes.
    let (code, v) = admin_json::<release1::Shop>(&valkey, &["lock", "write", "--path", lock_arg]).await;
    assert_eq!((code, v["status"].as_str()), (0, Some("written")), "{v}");
    let (code, v) = admin_json::<release1::Shop>(&valkey, &["migrate", "status"]).await;
    assert_eq!((code, &v["rebuild"], &v["running"]), (0, &serde_json::json!([]), &Value::Bool(false)), "{v}");
    let orders = release1::Shop::open(valkey.clone()).store::<release1::Order>();
    for i in 0..30 {
        let o = release1::Order { id: format!("o-{i}"), scope: "s1".into(), customer: format!("c-{}", i % 3) };
        microdcs_tests::created(&orders, &o).await;
    }

    // Release 2: the plan names the new index from the lock and the fingerprints.
    let (code, v) = admin_json::<release2::Shop>(&valkey, &["migrate", "plan", "--lock", lock_arg]).await;
    assert_eq!(code, 0, "nothing breaking: {v}");
    assert_eq!(v["rebuild"], serde_json::json!([{ "kind": "order", "indexes": ["by_customer"] }]), "{v}");
    let classes: Vec<(&str, &str)> = v["lock"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["class"].as_str().unwrap(), c["what"].as_str().unwrap()))
        .collect();
    assert_eq!(
        classes,
        [
            ("safe", "schema version 1 is now 2"),
            ("safe", "field `gift_note` appended"),
            ("rebuild", "new index `by_customer`")
        ],
        "{v}"
    );
    let by_customer = release2::Order::by_customer("s1", "c-1");
    let v2 = release2::Shop::open(valkey.clone()).store::<release2::Order>();
    let refused = v2.ids(by_customer.clone(), Page::first(100)).await;
    assert!(
        matches!(&refused, Err(microdcs_valkey::Error::IndexBuilding { index, .. }) if index == "by_customer"),
        "not backfilled yet: refused, never an empty answer: {refused:?}"
    );
    let (_, v) = admin_json::<release2::Shop>(&valkey, &["migrate", "status"]).await;
    assert_eq!(v["building"], serde_json::json!([{ "kind": "order", "indexes": ["by_customer"] }]), "{v}");
    // Release 1 has stopped: its entry in the registry lapses.
    writers_lapse::<release2::Shop>(&valkey).await;

    // Another operator holds the migration lease: apply is refused, nothing done.
    let leases = LeaseStore::new(valkey.clone());
    let Acquire::Acquired(held) =
        leases.acquire("migrate-Shop", "operator-2", std::time::Duration::from_secs(30), &new_op_id()).await.unwrap()
    else {
        panic!("free")
    };
    let err = admin::run::<release2::Shop>(&valkey, ["migrate", "apply"]).await.unwrap_err();
    assert!(err.to_string().contains("another operator runs a migration of `Shop`"), "{err}");
    let (_, v) = admin_json::<release2::Shop>(&valkey, &["migrate", "status"]).await;
    assert_eq!((&v["running"], &v["rebuild"][0]["indexes"]), (&Value::Bool(true), &serde_json::json!(["by_customer"])));
    leases.release(&held, &new_op_id()).await.unwrap();

    // Apply backfills the index (ready) and records its layout: no
    // rebuild, which beside live writers could only make it wrong; again,
    // it has nothing to do.
    let (code, v) = admin_json::<release2::Shop>(&valkey, &["migrate", "apply"]).await;
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["backfilled"][0]["ready"], serde_json::json!(["by_customer"]), "{v}");
    assert_eq!(v["backfilled"][0]["rewritten"], 30, "{v}");
    assert_eq!(v["building"], serde_json::json!([]), "{v}");
    assert_eq!(v["recorded"], serde_json::json!([{ "kind": "order", "index": "by_customer" }]), "{v}");
    assert_eq!(v["rebuilt"], serde_json::json!([]), "{v}");
    assert_eq!(v["left"], serde_json::json!([]), "{v}");
    assert_eq!(v2.ids(by_customer, Page::first(100)).await.unwrap().ids.len(), 10);
    let (code, v) = admin_json::<release2::Shop>(&valkey, &["migrate", "apply"]).await;
    assert_eq!(
        (code, &v["rebuilt"], &v["backfilled"], &v["recorded"]),
        (0, &serde_json::json!([]), &serde_json::json!([]), &serde_json::json!([])),
        "idempotent: {v}"
    );

    // Verify and finish are clean; the lease is free again.
    let (code, v) = admin_json::<release2::Shop>(&valkey, &["migrate", "verify"]).await;
    assert_eq!((code, &v["clean"]), (0, &Value::Bool(true)), "{v}");
    assert_eq!(v["kinds"][0]["documents"], 30, "every document of the island on its primary: {v}");
    let (code, v) = admin_json::<release2::Shop>(&valkey, &["migrate", "finish"]).await;
    assert_eq!((code, &v["clean"]), (0, &Value::Bool(true)), "{v}");
    let (_, v) = admin_json::<release2::Shop>(&valkey, &["migrate", "status"]).await;
    assert_eq!((&v["running"], &v["rebuild"]), (&Value::Bool(false), &serde_json::json!([])), "{v}");

    // And the lock takes release 2 with a plain bless.
    let (code, v) = admin_json::<release2::Shop>(&valkey, &["lock", "check", "--path", lock_arg]).await;
    assert_eq!((code, v["status"].as_str()), (1, Some("outdated")), "{v}");
    let (code, _) = admin_json::<release2::Shop>(&valkey, &["lock", "write", "--path", lock_arg]).await;
    assert_eq!(code, 0);
    let (code, v) = admin_json::<release2::Shop>(&valkey, &["lock", "check", "--path", lock_arg]).await;
    assert_eq!((code, v["status"].as_str()), (0, Some("current")), "{v}");

    // Release 3 drops the index. Built without raising the schema, its
    // `drop` keeps the keys and says why.
    let bycustomer_key = |c: &str| format!("{}:order:bycustomer:s1:{c}", prefix.as_str());
    let exists = |key: String| {
        let valkey = valkey.clone();
        async move {
            let n: u64 =
                microdcs_valkey::redis::cmd("EXISTS").arg(&key).query_async(&mut valkey.connection()).await.unwrap();
            n
        }
    };
    assert_eq!(exists(bycustomer_key("c-1")).await, 1);
    let (code, v) = admin_json::<release3_unraised::Shop>(&valkey, &["migrate", "drop", "--lock", lock_arg]).await;
    assert_eq!(code, 1, "{v}");
    assert!(v["dropped"][0]["skipped"].as_str().unwrap().contains("raise `schema`"), "{v}");
    assert_eq!(exists(bycustomer_key("c-1")).await, 1, "kept");
    // Built right, once release 2's writers are gone: the keys go, the
    // documents and their list stay, and a second run finds nothing.
    writers_lapse::<release3::Shop>(&valkey).await;
    let (code, v) = admin_json::<release3::Shop>(&valkey, &["migrate", "drop", "--lock", lock_arg]).await;
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["dropped"],
        serde_json::json!([{ "kind": "order", "index": "by_customer", "keys": 3, "skipped": null }])
    );
    for c in ["c-0", "c-1", "c-2"] {
        assert_eq!(exists(bycustomer_key(c)).await, 0, "{c}");
    }
    let (code, v) = admin_json::<release3::Shop>(&valkey, &["migrate", "verify"]).await;
    assert_eq!((code, &v["kinds"][0]["documents"]), (0, &serde_json::json!(30)), "{v}");
    let (code, v) = admin_json::<release3::Shop>(&valkey, &["migrate", "drop", "--lock", lock_arg]).await;
    assert_eq!((code, &v["dropped"][0]["keys"]), (0, &serde_json::json!(0)), "idempotent: {v}");
}

#[tokio::test]
async fn verify_finds_damage_and_an_unknown_kind_is_an_error() {
    let s = microdcs_tests::server();
    let prefix = microdcs_valkey::testing::unique_prefix("admin-verify");
    let valkey = Valkey::connect_url(s.url(), prefix.clone(), Default::default()).await.unwrap();
    let orders = release1::Shop::open(valkey.clone()).store::<release1::Order>();
    microdcs_tests::created(&orders, &release1::Order { id: "o-1".into(), scope: "s1".into(), customer: "c".into() })
        .await;
    let ran = admin::run::<release1::Shop>(&valkey, ["verify"]).await.unwrap();
    assert_eq!(ran.code, 0, "{}", ran.output);
    assert!(ran.output.contains("| (all) | (all) | none | 0 |"), "{}", ran.output);
    let mut raw = valkey.connection();
    let _: () = microdcs_valkey::redis::cmd("SREM")
        .arg(format!("{}:order:list:s1", prefix.as_str()))
        .arg("o-1")
        .query_async(&mut raw)
        .await
        .unwrap();
    let ran = admin::run::<release1::Shop>(&valkey, ["verify"]).await.unwrap();
    assert_eq!(ran.code, 1, "{}", ran.output);
    assert!(ran.output.contains("| order | list | missing | 1 |"), "{}", ran.output);
    let ran = admin::run::<release1::Shop>(&valkey, ["rebuild"]).await.unwrap();
    assert!(ran.output.contains("fixed 1 entries"), "{}", ran.output);
    let err = admin::run::<release1::Shop>(&valkey, ["verify", "--kind", "nonsense"]).await.unwrap_err();
    assert!(err.to_string().contains("unknown kind `nonsense` (kinds: order)"), "{err}");
    let ran = admin::run::<release1::Shop>(&valkey, ["keys"]).await.unwrap();
    assert!(ran.output.contains("order:list:{scope}"), "{}", ran.output);
}

/// `migrate apply` (its backfill writes documents through the
/// application's scripts), `status`, `drop` and `finish` run as a user with
/// the application's and the maintenance role's rules and nothing more, as
/// the admin tool's docs say.
#[tokio::test]
async fn the_migration_steps_run_with_the_app_and_maintenance_rules() {
    use microdcs_valkey::acl::AclRole;
    use microdcs_valkey::redis;
    let s = microdcs_tests::own_server();
    let prefix = microdcs_valkey::testing::unique_prefix("admin-acl");
    let fast = microdcs_valkey::config::WriteOptions {
        writer_heartbeat: std::time::Duration::from_millis(100),
        writer_lifetime: std::time::Duration::from_millis(300),
        ..Default::default()
    };
    // Release 1 writes as the server's default user.
    let owner = Valkey::connect_url(s.url(), prefix.clone(), fast.clone()).await.unwrap();
    let orders = release1::Shop::open(owner.clone()).store::<release1::Order>();
    for i in 0..12 {
        let o = release1::Order { id: format!("o-{i}"), scope: "s1".into(), customer: format!("c-{}", i % 3) };
        microdcs_tests::created(&orders, &o).await;
    }
    let lock_dir = std::env::temp_dir().join(format!("microdcs-admin-acl-{}", std::process::id()));
    std::fs::create_dir_all(&lock_dir).unwrap();
    let lock = lock_dir.join("shop.lock");
    let lock_arg = lock.to_str().unwrap();
    let ran = admin::run::<release1::Shop>(&owner, ["lock", "write", "--path", lock_arg]).await.unwrap();
    assert_eq!(ran.code, 0, "{}", ran.output);

    // The operator's user: the application's rules, then the maintenance
    // role's commands.
    let mut setuser = redis::cmd("ACL");
    setuser.arg("SETUSER").arg("operator");
    for r in AclRole::App.rules(&prefix) {
        setuser.arg(r);
    }
    for c in AclRole::Maintenance.commands().into_iter().chain(AclRole::Maintenance.fallback_commands().iter().copied())
    {
        setuser.arg(format!("+{c}"));
    }
    setuser.arg(">operator-secret");
    let () = setuser.query_async(&mut owner.connection()).await.unwrap();
    let host_port = s.host_port();
    let url = format!("redis://operator:operator-secret@{host_port}/");
    let operator = Valkey::connect_url(&url, prefix.clone(), fast).await.unwrap();

    // Release 1 is gone once its entry lapses; then release 2's steps.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let (code, v) = admin_json::<release2::Shop>(&operator, &["migrate", "status"]).await;
    assert_eq!((code, &v["writers"]), (0, &serde_json::json!([])), "{v}");
    assert_eq!(v["building"], serde_json::json!([{ "kind": "order", "indexes": ["by_customer"] }]), "{v}");
    let (code, v) = admin_json::<release2::Shop>(&operator, &["migrate", "apply"]).await;
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["backfilled"][0]["ready"], serde_json::json!(["by_customer"]), "{v}");
    assert_eq!(v["backfilled"][0]["rewritten"], 12, "{v}");
    let (code, v) = admin_json::<release2::Shop>(&operator, &["migrate", "finish"]).await;
    assert_eq!((code, &v["clean"]), (0, &Value::Bool(true)), "{v}");
    // Release 3 drops the index: the release-2 entries of the operator's
    // own backfill lapse first.
    let ran = admin::run::<release2::Shop>(&owner, ["lock", "write", "--path", lock_arg]).await.unwrap();
    assert_eq!(ran.code, 0, "{}", ran.output);
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let (code, v) = admin_json::<release3::Shop>(&operator, &["migrate", "drop", "--lock", lock_arg]).await;
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["dropped"][0]["keys"], 3, "{v}");
}
