//! The generated ACL rules against a real Valkey: each role's user runs its
//! whole flow with no `NOPERM`; the commands it sends are exactly its list
//! (the fallbacks aside); the inspector cannot write; no role reaches other
//! prefixes or administrative commands.

use std::collections::BTreeSet;

use microdcs_tests::fixtures::{JobResponse, Plant, WorkMaster};
use microdcs_tests::{command_calls, flows, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::testing::ValkeyServer;
use microdcs_valkey::{
    Error, KeyPrefix, Valkey, acl::AclRole, config::WriteOptions, inspect::EntryState, inspect::Inspector,
};

const PASSWORD: &str = "acl-test-password-1";

struct Env {
    server: ValkeyServer,
    admin: ConnectionManager,
    prefix: KeyPrefix,
}

async fn env(name: &str) -> Env {
    let server = microdcs_tests::own_server();
    let admin = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    Env { server, admin, prefix: unique_prefix(name) }
}

impl Env {
    /// Creates the role's user from the generated rules, with a password.
    async fn user(&mut self, role: AclRole) -> String {
        let name = format!("{}-user", role.name());
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER").arg(&name);
        for r in role.rules(&self.prefix) {
            cmd.arg(r);
        }
        cmd.arg(format!(">{PASSWORD}"));
        let () = cmd.query_async(&mut self.admin).await.unwrap();
        name
    }

    fn url_as(&self, user: &str) -> String {
        format!("redis://{user}:{PASSWORD}@{}/", self.server.host_port())
    }

    async fn connect_as(&mut self, role: AclRole) -> Valkey {
        let user = self.user(role).await;
        Valkey::connect_url(&self.url_as(&user), self.prefix.clone(), WriteOptions::default()).await.unwrap()
    }

    async fn reset_stats(&mut self) {
        let () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut self.admin).await.unwrap();
    }

    /// The commands sent since the last reset, without the admin's own.
    async fn used(&mut self) -> BTreeSet<String> {
        let admin_own = ["acl|setuser", "config|resetstat", "info"];
        command_calls(&mut self.admin)
            .await
            .into_iter()
            .filter(|(c, n)| *n > 0 && !admin_own.contains(&c.as_str()))
            .map(|(c, _)| c)
            .collect()
    }
}

/// What a role sent is within its list, and every listed command was sent.
fn exactly(role: AclRole, used: &BTreeSet<String>) {
    let listed: BTreeSet<String> = role.commands().into_iter().map(str::to_owned).collect();
    let fallback: BTreeSet<String> = role.fallback_commands().iter().map(|c| (*c).to_owned()).collect();
    let unlisted: Vec<&String> = used.iter().filter(|c| !listed.contains(*c) && !fallback.contains(*c)).collect();
    assert!(unlisted.is_empty(), "{role}: sent but not listed: {unlisted:?}");
    // `ASKING` follows a slot in migration on a cluster: never sent to one
    // server (the cluster test runs the flows as these users on a cluster);
    // `ROLE` goes only to a node a Sentinel names, never on these paths.
    let cluster_only = ["asking", "role"];
    let unused: Vec<&String> =
        listed.iter().filter(|c| !used.contains(*c) && !cluster_only.contains(&c.as_str())).collect();
    assert!(unused.is_empty(), "{role}: listed but never sent: {unused:?} (sent: {used:?})");
}

fn is_noperm(e: &Error) -> bool {
    matches!(e, Error::Redis(r) if r.code() == Some("NOPERM")) || e.to_string().contains("NOPERM")
}

#[tokio::test]
async fn no_role_reaches_other_prefixes_or_administration() {
    // DEBUG enabled, so that its refusal is the ACL's and not the server's.
    let server = ValkeyServer::start_local(&["--enable-debug-command", "yes"]).unwrap_or_else(|e| panic!("{e}"));
    let admin = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let mut e = Env { server, admin, prefix: unique_prefix("acl-fence") };
    for role in [AclRole::App, AclRole::Inspector, AclRole::Maintenance] {
        let user = e.user(role).await;
        let mut con = redis::Client::open(e.url_as(&user)).unwrap().get_multiplexed_async_connection().await.unwrap();
        let refused = |r: redis::RedisResult<redis::Value>, what: &str| {
            assert_eq!(r.as_ref().err().and_then(|e| e.code()), Some("NOPERM"), "{role} {what}: {r:?}");
        };
        refused(redis::cmd("GET").arg("other-prefix:key").query_async(&mut con).await, "another prefix");
        refused(redis::cmd("KEYS").arg("*").query_async(&mut con).await, "KEYS");
        refused(redis::cmd("FLUSHALL").query_async(&mut con).await, "FLUSHALL");
        refused(redis::cmd("CONFIG").arg("GET").arg("*").query_async(&mut con).await, "CONFIG");
        refused(redis::cmd("DEBUG").arg("SLEEP").arg(0).query_async(&mut con).await, "DEBUG");
        refused(redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut con).await, "SCRIPT FLUSH");
        refused(redis::cmd("ACL").arg("LIST").query_async(&mut con).await, "ACL");
        // Its own prefix is open to it.
        let own: redis::RedisResult<Option<String>> =
            redis::cmd("GET").arg(format!("{}:x", e.prefix.as_str())).query_async(&mut con).await;
        assert!(own.is_ok(), "{role}: {own:?}");
    }
}

#[test]
fn the_generated_rules_carry_no_password() {
    let p = KeyPrefix::new("island-7").unwrap();
    for role in AclRole::ALL {
        let line = role.setuser(&p, "u");
        assert!(!line.contains('>') && !line.contains('#') && !line.contains("nopass"), "{line}");
    }
}

#[tokio::test]
async fn a_command_the_acl_refuses_inside_a_script_is_a_permission_error() {
    let mut e = env("acl-in-script").await;
    // The app's rules less one command the put script uses.
    let name = "short-user";
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg(name);
    for r in AclRole::App.rules(&e.prefix) {
        cmd.arg(r);
    }
    cmd.arg("-exists").arg(format!(">{PASSWORD}"));
    let () = cmd.query_async(&mut e.admin).await.unwrap();
    let valkey = Valkey::connect_url(&e.url_as(name), e.prefix.clone(), WriteOptions::default()).await.unwrap();
    let store = Plant::open(valkey).store::<JobResponse>();
    let err = store.create(&JobResponse::new("r-1", "s1", "o-1", &[])).await.unwrap_err();
    assert!(err.is_auth(), "a permission refusal: {err:?}");
    assert!(!err.is_corrupt() && !err.is_connection(), "{err:?}");
    let exists: i64 = redis::cmd("EXISTS")
        .arg(format!("{}:jobresponse:r-1", e.prefix.as_str()))
        .query_async(&mut e.admin)
        .await
        .unwrap();
    assert_eq!(exists, 0, "nothing written");
}

#[tokio::test]
async fn verify_as_the_app_user_says_it_needs_the_maintenance_role() {
    let mut e = env("acl-verify-app").await;
    let admin_valkey = Valkey::connect_url(e.server.url(), e.prefix.clone(), WriteOptions::default()).await.unwrap();
    let responses = Plant::open(admin_valkey).store::<JobResponse>();
    // A unique index to check, so verify reads index keys the app may not.
    let _ = responses.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap();
    let valkey = e.connect_as(AclRole::App).await;
    let store = Plant::open(valkey).store::<JobResponse>();
    let err = store.verify(&microdcs_valkey::store::MaintenanceOptions::default()).await.unwrap_err();
    // A typed refusal naming the role, recognised as a permission error,
    // not a protocol error quoting the server's text.
    assert!(
        matches!(&err, Error::NoPermission { operation: "verify", role, .. } if *role == AclRole::Maintenance.name()),
        "{err:?}"
    );
    assert!(err.is_auth(), "{err:?}");
    assert!(err.to_string().contains("maintenance role"), "{err}");
}

/// The words `sh` makes of `line`, one per `printf` line.
fn shell_words(line: &str) -> Vec<String> {
    let out = std::process::Command::new("sh").arg("-c").arg(format!("printf '%s\\n' {line}")).output().unwrap();
    assert!(out.status.success(), "sh refused `{line}`: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn the_printed_setuser_line_survives_a_shell() {
    // `|` in `+client|setinfo`, `*` and `~` in key patterns, `&` in channel
    // patterns, `%` in the inspector's: each must reach `valkey-cli` as one
    // word, as the rules are.
    let p = KeyPrefix::new("island-7").unwrap();
    for role in AclRole::ALL {
        for user in ["plant", "a b", "it's", "$HOME", "back\\slash"] {
            let line = role.setuser(&p, user);
            let mut want = vec!["ACL".to_owned(), "SETUSER".to_owned(), user.to_owned()];
            want.extend(role.rules(&p));
            assert_eq!(shell_words(&line), want, "{line}");
        }
    }
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    #[tokio::test]
    async fn the_app_user_runs_every_flow_with_exactly_its_commands() {
        let mut e = env("acl-app").await;
        e.reset_stats().await;
        let valkey = e.connect_as(AclRole::App).await;
        flows::app_flow(&valkey).await.unwrap_or_else(|err| panic!("app flow under the app ACL: {err}"));
        let used = e.used().await;
        exactly(AclRole::App, &used);
    }

    #[tokio::test]
    async fn the_maintenance_user_verifies_and_repairs_with_exactly_its_commands() {
        let mut e = env("acl-maint").await;
        // Documents and damage of every kind, written as the admin.
        let admin_valkey =
            Valkey::connect_url(e.server.url(), e.prefix.clone(), WriteOptions::default()).await.unwrap();
        let plant = Plant::open(admin_valkey);
        let responses = plant.store::<JobResponse>();
        let masters = plant.store::<WorkMaster>();
        // r-6 is in a by-state set that is not a set (a wrong-type finding),
        // r-7 is in no by-state set but its hash keeps a state (a field to drop).
        let _ = responses.create(&JobResponse::new("r-6", "s1", "o-6", &["B"])).await.unwrap();
        let _ = responses.create(&JobResponse::new("r-7", "s1", "o-7", &[])).await.unwrap();
        for i in 0..6 {
            let _ =
                responses.create(&JobResponse::new(&format!("r-{i}"), "s1", &format!("o-{i}"), &["A"])).await.unwrap();
            let _ = masters
                .create(&WorkMaster { id: format!("w-{i}"), scope: "s1".into(), name: "n".into() })
                .await
                .unwrap();
        }
        let k = |rest: &str| format!("{}:{rest}", e.prefix.as_str());
        let damage: Vec<Vec<String>> = vec![
            vec!["ZREM".into(), k("jobresponse:list:s1"), "r-0".into()],
            vec!["ZADD".into(), k("jobresponse:list:s1"), "5".into(), "ghost".into()],
            vec!["SREM".into(), k("jobresponse:bystate:s1:A"), "r-1".into()],
            vec!["SADD".into(), k("jobresponse:bystate:s1:A"), "ghost".into()],
            vec!["DEL".into(), k("jobresponse:byorder:o-2")],
            vec!["SET".into(), k("jobresponse:byorder:o-ghost"), "ghost".into()],
            vec!["DEL".into(), k("jobresponse:bystate:s1:B")],
            vec!["SET".into(), k("jobresponse:bystate:s1:B"), "not a set".into()],
            vec!["HSET".into(), k("jobresponse:r-7"), "state".into(), "C".into()],
            vec!["HSET".into(), k("jobresponse:r-3"), "state".into(), "B".into()],
            vec!["SADD".into(), k("workmaster:list:s1"), "ghost".into()],
        ];
        for d in &damage {
            let mut cmd = redis::cmd(&d[0]);
            for a in &d[1..] {
                cmd.arg(a);
            }
            let _: redis::Value = cmd.query_async(&mut e.admin).await.unwrap();
        }
        e.reset_stats().await;
        let valkey = e.connect_as(AclRole::Maintenance).await;
        flows::maintenance_flow(&valkey).await.unwrap_or_else(|err| panic!("maintenance under its ACL: {err}"));
        let used = e.used().await;
        exactly(AclRole::Maintenance, &used);
        // The rebuild repaired everything.
        let opts = microdcs_valkey::store::MaintenanceOptions::default();
        let store = Plant::open(valkey.clone()).store::<JobResponse>();
        assert!(store.verify(&opts).await.unwrap().is_clean());
    }

    /// `migrate status` reads the registry of live writers and the index
    /// states besides the layouts: the maintenance role's rules allow it.
    #[tokio::test]
    async fn the_maintenance_user_reads_the_migration_status() {
        let mut e = env("acl-status").await;
        let admin_valkey =
            Valkey::connect_url(e.server.url(), e.prefix.clone(), WriteOptions::default()).await.unwrap();
        let responses = Plant::open(admin_valkey).store::<JobResponse>();
        let _ = responses.create(&JobResponse::new("r-1", "s1", "o-1", &["A"])).await.unwrap();
        let valkey = e.connect_as(AclRole::Maintenance).await;
        let ran = microdcs_valkey::admin::run::<Plant>(&valkey, ["migrate", "status", "--json"])
            .await
            .unwrap_or_else(|err| panic!("migrate status under the maintenance ACL: {err}"));
        let v: serde_json::Value = serde_json::from_str(&ran.output).unwrap();
        assert_eq!(ran.code, 0, "{v}");
        assert_eq!(v["writers"][0]["kind"], "jobresponse", "the writer that created r-1 is live: {v}");
    }

    #[tokio::test]
    async fn the_inspector_reads_everything_and_writes_nothing() {
        let mut e = env("acl-inspect").await;
        // Written as the admin: documents, a change stream with a group, a
        // dedupe claim, a lease and a heartbeat.
        let admin_valkey =
            Valkey::connect_url(e.server.url(), e.prefix.clone(), WriteOptions::default()).await.unwrap();
        flows::app_flow(&admin_valkey).await.unwrap();
        let plant = Plant::open(admin_valkey.clone());
        let responses = plant.store::<JobResponse>();
        let _ = responses.create(&JobResponse::new("r-9", "s1", "o-9", &["A"])).await.unwrap();
        Plant::sfc_heartbeat(&plant).unwrap().set("1700000000000", None).await.unwrap();
        {
            use microdcs_valkey::{lease::LeaseBackend, lease::LeaseStore};
            let leases = LeaseStore::new(admin_valkey.clone());
            let _ = leases.acquire("leader", "node-7", std::time::Duration::from_secs(60), "q-9").await.unwrap();
        }
        // One entry removed by hand: the inspector shows it missing.
        let () = redis::cmd("SREM")
            .arg(format!("{}:jobresponse:bystate:s1:A", e.prefix.as_str()))
            .arg("r-9")
            .query_async(&mut e.admin)
            .await
            .unwrap();

        e.reset_stats().await;
        let valkey = e.connect_as(AclRole::Inspector).await;
        let inspector = Inspector::new(&Plant::open(valkey.clone()));
        assert!(inspector.kinds().iter().any(|k| k.kind == "jobresponse"));
        assert!(inspector.families().iter().any(|f| f.name == "tombstones"));
        assert_eq!(inspector.scopes("jobresponse").await.unwrap(), ["s1"]);
        let ids = inspector.ids("jobresponse", "s1", 0, 2).await.unwrap();
        assert_eq!(ids.ids.len(), 2);
        assert!(ids.next.is_some());
        let masters = inspector.ids("workmaster", "s1", 0, 10).await.unwrap();
        assert_eq!(masters.ids, ["w-1"]);
        let by_order = inspector.index_ids("jobresponse", "by_order", &["o-9"], 0, 10).await.unwrap();
        assert_eq!(by_order.ids, ["r-9"]);
        let queued = inspector.index_ids("jobresponse", "by_state", &["s1", "Running"], 0, 100).await.unwrap();
        assert!(!queued.ids.is_empty());
        assert!(matches!(
            inspector.index_ids("jobresponse", "by_nothing", &[], 0, 1).await,
            Err(Error::InvalidArgument(_))
        ));
        let doc = inspector.document("jobresponse", "r-9").await.unwrap().expect("stored");
        assert_eq!(doc.version.as_deref(), Some("1"));
        assert_eq!(doc.ops.len(), 1);
        assert_eq!(doc.document.as_ref().and_then(|d| d["job_order_id"].as_str()), Some("o-9"));
        let state = |index: &str| doc.entries.iter().find(|x| x.index == index).map(|x| x.state.clone());
        assert_eq!(state("list"), Some(EntryState::Present));
        assert_eq!(state("by_order"), Some(EntryState::Present));
        assert_eq!(state("by_state"), Some(EntryState::Missing), "the entry removed by hand");
        assert!(inspector.document("jobresponse", "nope").await.unwrap().is_none());
        let claim = inspector.dedupe("urn:line-1", "e-1").await.unwrap();
        assert_eq!(claim.value.as_deref(), Some("done"));
        let lease = inspector.lease("leader").await.unwrap();
        assert_eq!((lease.holder.as_deref(), lease.token.as_deref()), (Some("node-7"), Some("2")));
        assert!(lease.ttl_ms.is_some_and(|t| t > 0));
        let stream = inspector.changes("jobresponse", "s1").await.unwrap();
        assert!(stream.length > 0);
        assert!(stream.groups.iter().any(|g| g.name == "flow"), "{stream:?}");
        let work = inspector.stream("sfc_work", &["s1"]).await.unwrap();
        assert_eq!(work.groups.len(), 1);
        let beat = inspector.value("sfc_heartbeat", &[]).await.unwrap();
        assert!(beat.age_ms.is_some_and(|a| a > 0));
        assert!(matches!(inspector.value("no_such_family", &[]).await, Err(Error::InvalidArgument(_))));
        let used = e.used().await;
        exactly(AclRole::Inspector, &used);

        // Every write is refused.
        let store = Plant::open(valkey.clone()).store::<JobResponse>();
        let put = store.create(&JobResponse::new("r-x", "s1", "o-x", &[])).await;
        assert!(put.as_ref().is_err_and(is_noperm), "{put:?}");
        let mut con =
            redis::Client::open(e.url_as("inspector-user")).unwrap().get_multiplexed_async_connection().await.unwrap();
        let key = format!("{}:anything", e.prefix.as_str());
        let set: redis::RedisResult<()> = redis::cmd("SET").arg(&key).arg("1").query_async(&mut con).await;
        assert_eq!(set.unwrap_err().code(), Some("NOPERM"));
        let script: redis::RedisResult<()> = redis::cmd("EVAL")
            .arg("return redis.call('SET', KEYS[1], '1')")
            .arg(1)
            .arg(&key)
            .query_async(&mut con)
            .await;
        assert_eq!(script.unwrap_err().code(), Some("NOPERM"));
        let exists: i64 = redis::cmd("EXISTS").arg(&key).query_async(&mut e.admin).await.unwrap();
        assert_eq!(exists, 0, "nothing written");
    }
}
