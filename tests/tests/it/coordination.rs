//! Dedupe claims, the start lease and the fencing lease store: one contract
//! suite run against the in-memory and the Valkey implementations, plus the
//! Valkey-only races, takeovers, cut connections and corrupt state.
//!
//! Long on purpose: the same contract suite runs against both backends, so
//! it stays in one file with the helpers it shares.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use microdcs_tests::{FaultProxy, ValkeyServer, server, unique_prefix};
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{
    Error, Valkey, config::WriteOptions, dedupe::Claim, dedupe::DedupeStore, dedupe::MemoryDedupe,
    dedupe::ValkeyDedupe, lease::Acquire, lease::Lease, lease::LeaseBackend, lease::LeaseFamilies, lease::LeaseStore,
    lease::MemoryLeases, start_lease::MemoryStartLease, start_lease::StartLease, start_lease::ValkeyStartLease,
};

const LEASE: Duration = Duration::from_secs(1);
const RETENTION: Duration = Duration::from_secs(60);

async fn valkey(server: &ValkeyServer, name: &str) -> Valkey {
    Valkey::connect_url(server.url(), unique_prefix(name), WriteOptions::default())
        .await
        .unwrap_or_else(|e| server.fail("connect", &e))
}

// ---- dedupe contract ----

async fn dedupe_contract(d: &impl DedupeStore) {
    assert_eq!(d.claim("urn:line-1", "e-1", "tok-a").await.unwrap(), Claim::Claimed);
    assert_eq!(d.claim("urn:line-1", "e-1", "tok-a").await.unwrap(), Claim::Claimed, "own token claims again");
    assert_eq!(d.claim("urn:line-1", "e-1", "tok-b").await.unwrap(), Claim::Busy, "another holder");
    let left = d.lease_remaining("urn:line-1", "e-1").await.unwrap();
    assert!(left > Duration::ZERO && left <= LEASE, "{left:?}");
    d.mark_done("urn:line-1", "e-1").await.unwrap();
    assert_eq!(d.claim("urn:line-1", "e-1", "tok-b").await.unwrap(), Claim::Done);
    assert_eq!(d.claim("urn:line-1", "e-1", "tok-a").await.unwrap(), Claim::Done);
    let left = d.lease_remaining("urn:line-1", "e-1").await.unwrap();
    assert!(left > LEASE && left <= RETENTION, "done stays for the retention: {left:?}");
    // Nothing held: zero, never negative (a caller sleeps for it).
    assert_eq!(d.lease_remaining("urn:line-1", "e-none").await.unwrap(), Duration::ZERO);
    // An expired claim can be taken by another holder.
    assert_eq!(d.claim("urn:line-1", "e-2", "tok-a").await.unwrap(), Claim::Claimed);
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    assert_eq!(d.lease_remaining("urn:line-1", "e-2").await.unwrap(), Duration::ZERO);
    assert_eq!(d.claim("urn:line-1", "e-2", "tok-b").await.unwrap(), Claim::Claimed);
    // Source and id are hashed together: another source is another event.
    assert_eq!(d.claim("urn:line-2", "e-1", "tok-b").await.unwrap(), Claim::Claimed);
}

async fn start_lease_contract(s: &impl StartLease) {
    // Held checks on a long lifetime (a loaded machine cannot outlast it),
    // expiry on a short one of its own.
    let hold = Duration::from_secs(5);
    assert!(s.acquire("cfg-1", hold).await.unwrap());
    assert!(!s.acquire("cfg-1", hold).await.unwrap());
    assert!(s.acquire("cfg-2", hold).await.unwrap());
    assert!(s.acquire("cfg-4", Duration::from_millis(100)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(s.acquire("cfg-4", hold).await.unwrap(), "after its lifetime");
    assert!(!s.acquire("cfg-4", hold).await.unwrap(), "held again");
    assert!(!s.acquire("cfg-1", hold).await.unwrap(), "cfg-1 still held");
    // Lifetimes outside 1 ms..30 days, and empty or over-long ids, are the
    // caller's mistake, refused before anything is held.
    for lifetime in [Duration::ZERO, Duration::from_micros(500), Duration::from_secs(30 * 86_400 + 1), Duration::MAX] {
        let e = s.acquire("cfg-3", lifetime).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{lifetime:?}: {e:?}");
    }
    assert!(s.acquire("cfg-3", Duration::from_secs(30 * 86_400)).await.unwrap(), "nothing held by the refusals");
    for id in [String::new(), "x".repeat(100_000)] {
        let e = s.acquire(&id, Duration::from_secs(1)).await.unwrap_err();
        assert!(matches!(e, Error::Key(_)), "{e:?}");
    }
}

/// Dedupe lifetimes outside 1 ms..30 days are refused on use, before
/// anything is stored.
async fn dedupe_bounds_contract<D: DedupeStore>(make: impl Fn(Duration, Duration) -> D) {
    for bad in [Duration::ZERO, Duration::from_secs(30 * 86_400 + 1), Duration::MAX] {
        let d = make(bad, RETENTION);
        let e = d.claim("urn:bounds", "e-1", "tok").await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "lease {bad:?}: {e:?}");
        assert_eq!(d.lease_remaining("urn:bounds", "e-1").await.unwrap(), Duration::ZERO, "nothing stored");
        let d = make(LEASE, bad);
        let e = d.mark_done("urn:bounds", "e-1").await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "retention {bad:?}: {e:?}");
        assert_eq!(d.lease_remaining("urn:bounds", "e-1").await.unwrap(), Duration::ZERO, "nothing stored");
    }
    let longest = Duration::from_secs(30 * 86_400);
    let d = make(longest, longest);
    assert_eq!(d.claim("urn:bounds", "e-2", "tok").await.unwrap(), Claim::Claimed);
    d.mark_done("urn:bounds", "e-2").await.unwrap();
}

#[tokio::test]
async fn dedupe_and_start_lease_contract_in_memory() {
    dedupe_contract(&MemoryDedupe::new(LEASE, RETENTION)).await;
    dedupe_bounds_contract(MemoryDedupe::new).await;
    start_lease_contract(&MemoryStartLease::default()).await;
}

#[tokio::test]
async fn dedupe_and_start_lease_contract_on_valkey() {
    let s = server();
    let v = valkey(&s, "dedupe").await;
    let d = ValkeyDedupe::new(v.clone(), LEASE, RETENTION);
    dedupe_contract(&d).await;
    dedupe_bounds_contract(|lease, retention| ValkeyDedupe::new(v.clone(), lease, retention)).await;
    start_lease_contract(&ValkeyStartLease::new(v.clone())).await;
    // The reference key: ce:dedupe:{first 20 bytes of
    // SHA-256("{bytes in source}:{source}{id}"), hex}.
    let key = d.key("urn:line-1", "e-1").unwrap();
    assert_eq!(key, format!("{}:ce:dedupe:bd8fac7fadad4fe97cae0a3053f53ad02f326d83", v.prefix()));
    let held: String = redis::cmd("GET").arg(&key).query_async(&mut v.connection()).await.unwrap();
    assert_eq!(held, "done");
}

#[tokio::test]
async fn hundred_concurrent_claims_one_winner() {
    let s = server();
    let d = Arc::new(ValkeyDedupe::new(valkey(&s, "claims").await, Duration::from_secs(5), RETENTION));
    let mut tasks = Vec::new();
    for i in 0..100 {
        let d = d.clone();
        tasks.push(tokio::spawn(async move { d.claim("urn:src", "event-7", &format!("tok-{i}")).await.unwrap() }));
    }
    let mut claimed = 0;
    let mut busy = 0;
    for t in tasks {
        match t.await.unwrap() {
            Claim::Claimed => claimed += 1,
            Claim::Busy => busy += 1,
            Claim::Done => panic!("not done yet"),
        }
    }
    assert_eq!((claimed, busy), (1, 99));
    d.mark_done("urn:src", "event-7").await.unwrap();
    assert_eq!(d.claim("urn:src", "event-7", "tok-x").await.unwrap(), Claim::Done);
}

/// CloudEvents sources are URIs full of `:`: a source and an id that meet
/// at another `:` are another event, with a claim of its own.
async fn colliding_pairs_contract(d: &impl DedupeStore) {
    let (a, b) = (("urn:plant:line", "3:evt-9"), ("urn:plant:line:3", "evt-9"));
    assert_eq!(d.claim(a.0, a.1, "tok-a").await.unwrap(), Claim::Claimed);
    assert_eq!(d.claim(b.0, b.1, "tok-b").await.unwrap(), Claim::Claimed, "not busy with the other's claim");
    d.mark_done(a.0, a.1).await.unwrap();
    assert_eq!(d.claim(b.0, b.1, "tok-c").await.unwrap(), Claim::Busy, "still its own claim, not done");
    assert_eq!(d.claim(a.0, a.1, "tok-c").await.unwrap(), Claim::Done);
    d.mark_done(b.0, b.1).await.unwrap();
    assert_eq!(d.claim(b.0, b.1, "tok-c").await.unwrap(), Claim::Done);
}

#[tokio::test]
async fn colliding_sources_and_ids_are_independent_claims() {
    colliding_pairs_contract(&MemoryDedupe::new(Duration::from_secs(30), RETENTION)).await;
    let s = server();
    let v = valkey(&s, "dedupe-collide").await;
    let d = ValkeyDedupe::new(v.clone(), Duration::from_secs(30), RETENTION);
    colliding_pairs_contract(&d).await;
    assert_ne!(d.key("urn:plant:line", "3:evt-9").unwrap(), d.key("urn:plant:line:3", "evt-9").unwrap());
}

/// Keys written before length-prefixed digests: while they are read, an
/// event whose old key holds a claim or `done` answers by it, and nothing
/// is written under its new key; with the read off, the new key alone.
async fn legacy_keys_contract(v: &Valkey) {
    let d = ValkeyDedupe::new(v.clone(), Duration::from_secs(30), RETENTION);
    let mut con = v.connection();
    // The old digests, literal: 16 bytes of SHA-256("source:id"), hex.
    let old = |hash: &str| format!("{}:ce:dedupe:{hash}", v.prefix());
    let set = |key: String, value: &str| {
        let mut c = redis::cmd("SET");
        c.arg(key).arg(value).arg("PX").arg(60_000);
        c
    };
    // Done by the previous version.
    let _: () = set(old("eb69fca6268e33555c1625bc64d970a0"), "done").query_async(&mut con).await.unwrap();
    assert_eq!(d.claim("urn:line-1", "e-1", "tok").await.unwrap(), Claim::Done);
    let left = d.lease_remaining("urn:line-1", "e-1").await.unwrap();
    assert!(left > Duration::from_secs(30) && left <= Duration::from_secs(60), "the old key's time: {left:?}");
    let new_key = d.key("urn:line-1", "e-1").unwrap();
    let exists: bool = redis::cmd("EXISTS").arg(&new_key).query_async(&mut con).await.unwrap();
    assert!(!exists, "nothing written under the new key");
    // Claimed by an instance of the previous version: busy for others,
    // ours for its own token; both pairs that shared the old key answer by
    // it (it cannot tell them apart) until it expires.
    let _: () = set(old("fedef8b49def6064a079ed938b8f3daa"), "processing:old-1").query_async(&mut con).await.unwrap();
    assert_eq!(d.claim("urn:plant:line:3", "evt-9", "tok").await.unwrap(), Claim::Busy);
    assert_eq!(d.claim("urn:plant:line", "3:evt-9", "tok").await.unwrap(), Claim::Busy);
    assert_eq!(d.claim("urn:plant:line:3", "evt-9", "old-1").await.unwrap(), Claim::Claimed);
    // Damage in an old key: typed, named, left as it is.
    let damaged = old("21e6556ff42e744f8788dc4fff911783"); // ("src", "1")
    let _: () = set(damaged.clone(), "garbage").query_async(&mut con).await.unwrap();
    match d.claim("src", "1", "tok").await {
        Err(Error::Corrupt { key, .. }) => assert_eq!(key, damaged),
        other => panic!("{other:?}"),
    }
    let _: () = redis::cmd("DEL").arg(&damaged).query_async(&mut con).await.unwrap();
    let _: () = redis::cmd("HSET").arg(&damaged).arg("f").arg("v").query_async(&mut con).await.unwrap();
    match d.claim("src", "1", "tok").await {
        Err(Error::WrongType { key, .. }) => assert_eq!(key, damaged),
        other => panic!("{other:?}"),
    }
    let kind: String = redis::cmd("TYPE").arg(&damaged).query_async(&mut con).await.unwrap();
    assert_eq!(kind, "hash");
    // With the read off, the new keys alone.
    let off = d.clone().legacy_keys(false);
    assert_eq!(off.claim("urn:line-1", "e-1", "tok").await.unwrap(), Claim::Claimed);
    assert_eq!(off.claim("urn:plant:line", "3:evt-9", "tok").await.unwrap(), Claim::Claimed);
    assert_eq!(off.claim("src", "1", "tok").await.unwrap(), Claim::Claimed);
    // The new key answers first once the old one has gone.
    let _: () = redis::cmd("DEL").arg(old("eb69fca6268e33555c1625bc64d970a0")).query_async(&mut con).await.unwrap();
    assert_eq!(d.claim("urn:line-1", "e-1", "tok").await.unwrap(), Claim::Claimed);
    assert_eq!(d.claim("urn:line-1", "e-1", "tok-2").await.unwrap(), Claim::Busy);
}

#[tokio::test]
async fn old_format_dedupe_keys_answer_during_an_upgrade() {
    let s = server();
    legacy_keys_contract(&valkey(&s, "dedupe-legacy").await).await;
    // A cluster node with every slot refuses a script across slots: with
    // an untagged prefix the old key is read on its own.
    let cluster = microdcs_valkey::testing::ValkeyCluster::start_local(1, 0).unwrap_or_else(|e| panic!("{e}"));
    let config = microdcs_valkey::config::ValkeyConfig {
        connection_string: microdcs_valkey::config::Secret::new(cluster.connection_string()),
        // The cluster is this test's own: a fixed untagged prefix.
        key_prefix: "dedupe-legacy-sharded".to_owned(),
        placement: microdcs_valkey::config::Placement::Sharded,
        ..microdcs_valkey::MicroDcsConfig::default().valkey
    };
    let sharded = Valkey::connect(&config).await.unwrap_or_else(|e| panic!("{e}"));
    let d = ValkeyDedupe::new(sharded.clone(), LEASE, RETENTION);
    let slot = async |key: String| -> u16 {
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query_async(&mut sharded.connection()).await.unwrap()
    };
    let old = format!("{}:ce:dedupe:eb69fca6268e33555c1625bc64d970a0", sharded.prefix());
    assert_ne!(slot(old).await, slot(d.key("urn:line-1", "e-1").unwrap()).await, "the two-step read is what runs");
    legacy_keys_contract(&sharded).await;
    // An island prefix: both keys in the claim's own script.
    let config = microdcs_valkey::config::ValkeyConfig {
        key_prefix: microdcs_valkey::testing::unique_island("dedupe-legacy-island").as_str().to_owned(),
        placement: microdcs_valkey::config::Placement::Island,
        ..config
    };
    legacy_keys_contract(&Valkey::connect(&config).await.unwrap_or_else(|e| panic!("{e}"))).await;
}

// ---- lease contract ----

fn acquired(a: Acquire) -> Lease {
    match a {
        Acquire::Acquired(l) => l,
        Acquire::Held { owner, .. } => panic!("held by {owner}"),
    }
}

async fn lease_contract(b: &impl LeaseBackend, name: &str) {
    // Held for longer than any stall of a loaded machine; shortened only
    // to watch it expire.
    let ttl = Duration::from_secs(5);
    let short = Duration::from_millis(100);
    // A lifetime is 1 ms to 30 days: anything else (half a millisecond
    // too, which the server could only round) is refused, nothing taken.
    let bounds = format!("{name}-bounds");
    let too_long = Duration::from_secs(30 * 86_400 + 1);
    for bad in [Duration::ZERO, Duration::from_micros(500), Duration::from_micros(999), too_long, Duration::MAX] {
        let e = b.acquire(&bounds, "alice", bad, "req-bound").await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e:?}");
    }
    assert_eq!(b.fence(&bounds).await.unwrap(), 0, "no grant for a refused lifetime");
    let a = acquired(b.acquire(name, "alice", ttl, "req-a1").await.unwrap());
    assert_eq!(a.owner, "alice");
    assert_eq!(b.fence(name).await.unwrap(), a.token);
    for bad in [Duration::ZERO, Duration::from_micros(500), too_long] {
        let e = b.renew(&a, bad, "req-a-bound").await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e:?}");
    }
    // Idempotent by request id (the lease as it is now: the same grant,
    // its time left); a different call with the same id conflicts.
    let again = acquired(b.acquire(name, "alice", ttl, "req-a1").await.unwrap());
    assert_eq!(Lease { ttl: a.ttl, ..again.clone() }, a);
    assert!(again.ttl <= a.ttl, "{again:?}");
    // Only the token of the latest grant writes: none was issued yet above
    // it, and 0 never is.
    for token in [a.token + 1, a.token + 100] {
        assert!(matches!(b.fenced_write(name, token, b"x").await, Err(Error::InvalidArgument(_))), "{token}");
    }
    assert!(matches!(b.fenced_write(name, 0, b"x").await, Err(Error::Fenced { .. })));
    let never = format!("{name}-never-leased");
    assert!(matches!(b.fenced_write(&never, 0, b"x").await, Err(Error::InvalidArgument(_))));
    assert_eq!(b.read_protected(&never).await.unwrap(), None);
    assert_eq!(b.read_protected(name).await.unwrap(), None, "nothing written");
    let conflict = b.acquire(name, "mallory", ttl, "req-a1").await.unwrap_err();
    assert!(matches!(conflict, Error::RequestConflict { .. }), "{conflict:?}");
    // Owners, lease ids and request ids are lease metadata: never in Debug or error texts.
    for text in [format!("{conflict:?}"), conflict.to_string(), format!("{a:?}")] {
        for secret in ["req-a1", "mallory", "alice", a.id.as_str()] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
    match b.acquire(name, "bob", ttl, "req-b1").await.unwrap() {
        held @ Acquire::Held { .. } => {
            assert!(!format!("{held:?}").contains("alice"), "{held:?}");
            let Acquire::Held { owner, remaining } = held else { unreachable!() };
            assert_eq!(owner, "alice");
            assert!(remaining <= ttl);
        }
        Acquire::Acquired(_) => panic!("two owners"),
    }
    assert_eq!(b.renew(&a, ttl, "req-a2").await.unwrap(), ttl);
    b.fenced_write(name, a.token, b"v1").await.unwrap();
    // A forged grant cannot renew or release.
    let forged = Lease { owner: "bob".into(), ..a.clone() };
    assert!(matches!(b.renew(&forged, ttl, "req-f1").await, Err(Error::LeaseLost { .. })));
    assert!(matches!(b.release(&forged, "req-f2").await, Err(Error::LeaseNotHeld { .. })));
    // Expiry, takeover: strictly larger token; the old holder is fenced out.
    assert_eq!(b.renew(&a, short, "req-a2s").await.unwrap(), short);
    tokio::time::sleep(short + Duration::from_millis(150)).await;
    let c = acquired(b.acquire(name, "carol", ttl, "req-c1").await.unwrap());
    assert!(c.token > a.token);
    // Replays that arrive after the lease ended promise nothing: the
    // renewal is lost, the acquire says who holds the lease now.
    assert!(matches!(b.renew(&a, ttl, "req-a2").await, Err(Error::LeaseLost { .. })), "a late replayed renewal");
    match b.acquire(name, "alice", ttl, "req-a1").await.unwrap() {
        Acquire::Held { owner, .. } => assert_eq!(owner, "carol"),
        other => panic!("a late replayed acquire promised {other:?}"),
    }
    assert!(matches!(b.renew(&a, ttl, "req-a3").await, Err(Error::LeaseLost { .. })), "no revival");
    assert!(matches!(b.release(&a, "req-a4").await, Err(Error::LeaseNotHeld { .. })));
    match b.fenced_write(name, a.token, b"stale").await {
        Err(Error::Fenced { token, highest, .. }) => assert_eq!((token, highest), (a.token, c.token)),
        other => panic!("{other:?}"),
    }
    assert_eq!(b.read_protected(name).await.unwrap().as_deref(), Some(b"v1".as_slice()), "byte-identical");
    b.fenced_write(name, c.token, b"v2").await.unwrap();
    b.release(&c, "req-c2").await.unwrap();
    b.release(&c, "req-c2").await.unwrap();
    // Released, nobody holding it: carol's acquire replayed has no time left.
    let late = acquired(b.acquire(name, "carol", ttl, "req-c1").await.unwrap());
    assert_eq!((late.id.as_str(), late.token, late.ttl), (c.id.as_str(), c.token, Duration::ZERO));
    let d = acquired(b.acquire(name, "dave", ttl, "req-d1").await.unwrap());
    assert!(d.token > c.token);
    // The granted lifetime is what the backend holds: whole milliseconds.
    let asked = Duration::from_micros(1_500_700);
    b.release(&d, "req-d2").await.unwrap();
    let e = acquired(b.acquire(name, "erin", asked, "req-e1").await.unwrap());
    assert_eq!(e.ttl, Duration::from_millis(1500), "acquire returns the lifetime held");
    assert_eq!(b.renew(&e, Duration::from_micros(2_000_900), "req-e2").await.unwrap(), Duration::from_millis(2000));
    // No token above 2^53-1 is ever issued: such a write is refused as an argument.
    assert!(matches!(b.fenced_write(name, 1 << 53, b"x").await, Err(Error::InvalidArgument(_))));
}

#[tokio::test]
async fn lease_contract_in_memory() {
    lease_contract(&MemoryLeases::default(), "printer").await;
}

#[tokio::test]
async fn lease_contract_on_valkey() {
    let s = server();
    let v = valkey(&s, "leasec").await;
    let store = LeaseStore::new(v.clone());
    lease_contract(&store, "printer").await;
    // Every key of the lease carries the hash tag {printer}; the counter never expires.
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{}:lease:*", v.prefix())).query_async(&mut v.connection()).await.unwrap();
    assert!(!keys.is_empty() && keys.iter().all(|k| k.contains(":lease:{printer}")), "{keys:?}");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("{}:lease:{{printer}}:fence", v.prefix()))
        .query_async(&mut v.connection())
        .await
        .unwrap();
    assert_eq!(ttl, -1);
}

#[tokio::test]
async fn hundred_concurrent_acquires_one_owner_twenty_times() {
    let s = server();
    let store = Arc::new(LeaseStore::new(valkey(&s, "race").await));
    for round in 0..20 {
        let name = format!("res-{round}");
        let mut tasks = Vec::new();
        for i in 0..100 {
            let (store, name) = (store.clone(), name.clone());
            tasks.push(tokio::spawn(async move {
                store
                    .acquire(&name, &format!("owner-{i}"), Duration::from_secs(30), &format!("r{round}-{i}"))
                    .await
                    .unwrap()
            }));
        }
        let mut owners = 0;
        let mut held = 0;
        for t in tasks {
            match t.await.unwrap() {
                Acquire::Acquired(l) => {
                    owners += 1;
                    assert_eq!(l.token, 1, "one token generation");
                }
                Acquire::Held { .. } => held += 1,
            }
        }
        assert_eq!((owners, held), (1, 99), "round {round}");
        assert_eq!(store.fence(&name).await.unwrap(), 1);
    }
    // 1,000 tasks over 10 keys: exactly 10 owners.
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .acquire(&format!("key-{}", i % 10), &format!("o-{i}"), Duration::from_secs(30), &format!("k-{i}"))
                .await
                .unwrap()
        }));
    }
    let mut names = HashSet::new();
    for t in tasks {
        if let Acquire::Acquired(l) = t.await.unwrap() {
            assert!(names.insert(l.name), "two owners of one key");
        }
    }
    assert_eq!(names.len(), 10);
}

#[tokio::test]
async fn fifty_takeovers_give_strictly_increasing_tokens() {
    let s = server();
    let store = LeaseStore::new(valkey(&s, "takeover").await);
    let ttl = Duration::from_millis(150);
    let mut last = 0;
    let mut previous: Option<Lease> = None;
    for i in 0..50 {
        let owner = if i % 2 == 0 { "even" } else { "odd" };
        let l = acquired(store.acquire("cell", owner, ttl, &format!("t-{i}")).await.unwrap());
        assert!(l.token > last, "cycle {i}: {} after {last}", l.token);
        last = l.token;
        if let Some(p) = &previous {
            assert!(matches!(store.fenced_write("cell", p.token, b"old").await, Err(Error::Fenced { .. })));
        }
        store.fenced_write("cell", l.token, format!("cycle-{i}").as_bytes()).await.unwrap();
        previous = Some(l);
        tokio::time::sleep(ttl + Duration::from_millis(30)).await;
    }
    assert_eq!(last, 50);
}

#[tokio::test]
async fn corrupt_lease_state_fails_closed() {
    let s = server();
    let v = valkey(&s, "corrupt").await;
    let store = LeaseStore::new(v.clone());
    let mut raw = ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap();
    let l = acquired(store.acquire("oven", "alice", Duration::from_secs(30), "c-1").await.unwrap());
    let record = format!("{}:lease:{{oven}}", v.prefix());
    // A record without TTL.
    let _: () = redis::cmd("PERSIST").arg(&record).query_async(&mut raw).await.unwrap();
    let before = store.fence("oven").await.unwrap();
    assert!(matches!(
        store.acquire("oven", "bob", Duration::from_secs(1), "c-2").await,
        Err(Error::LeaseCorrupt { .. })
    ));
    assert!(matches!(store.renew(&l, Duration::from_secs(1), "c-3").await, Err(Error::LeaseCorrupt { .. })));
    assert_eq!(store.fence("oven").await.unwrap(), before, "fence unchanged");
    // Release still cleans up; then the lease can be taken again.
    store.release(&l, "c-4").await.unwrap();
    let exists: bool = redis::cmd("EXISTS").arg(&record).query_async(&mut raw).await.unwrap();
    assert!(!exists);
    let m = acquired(store.acquire("oven", "bob", Duration::from_secs(1), "c-5").await.unwrap());
    assert_eq!(m.token, before + 1);
    // A malformed record (token not a number).
    let _: () = redis::cmd("HSET").arg(&record).arg("token").arg("many").query_async(&mut raw).await.unwrap();
    assert!(matches!(
        store.acquire("oven", "carol", Duration::from_secs(1), "c-6").await,
        Err(Error::LeaseCorrupt { .. })
    ));
    assert_eq!(store.fence("oven").await.unwrap(), before + 1);
}

microdcs_valkey::keyspace! {
    /// The lease families declared like any other (the fencing lease keys in our keyspace):
    /// one hash tag per lease, checked for overlaps at compile time.
    Leases {
        lease: hash("locks:{#name}"),
        lease_fence: string("locks:{#name}:fence"),
        lease_request: hash("locks:{#name}:req:{request}"),
        lease_data: string("locks:{#name}:data"),
    }
}

#[tokio::test]
async fn lease_keys_come_from_the_declared_keyspace() {
    let s = server();
    let v = valkey(&s, "declared").await;
    let family = |name: &str| *Leases::SPEC.declared(name).unwrap();
    let families = LeaseFamilies {
        record: family("lease"),
        fence: family("lease_fence"),
        request: family("lease_request"),
        data: family("lease_data"),
    };
    let store = LeaseStore::new(v.clone()).with_families(families).unwrap();
    let l = acquired(store.acquire("mixer", "alice", Duration::from_secs(5), "d-1").await.unwrap());
    store.fenced_write("mixer", l.token, b"x").await.unwrap();
    let mut keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{}:*", v.prefix())).query_async(&mut v.connection()).await.unwrap();
    keys.sort();
    let p = v.prefix().as_str();
    assert_eq!(
        keys,
        [
            format!("{p}:locks:{{mixer}}"),
            format!("{p}:locks:{{mixer}}:data"),
            format!("{p}:locks:{{mixer}}:fence"),
            format!("{p}:locks:{{mixer}}:req:d-1")
        ]
    );
    assert_eq!(Leases::lease_fence_key(v.prefix(), "mixer").unwrap(), format!("{p}:locks:{{mixer}}:fence"));
    // A family of the wrong shape is refused when the store is built.
    let wrong = LeaseFamilies { request: family("lease_fence"), ..families };
    let err = LeaseStore::new(v.clone()).with_families(wrong).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("lease_fence")), "{err}");
    // One key for two roles: a protected write would overwrite the counter.
    let shared = LeaseFamilies { data: family("lease_fence"), ..families };
    let err = LeaseStore::new(v.clone()).with_families(shared).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("share the key")), "{err}");
}

async fn raw(s: &ValkeyServer) -> ConnectionManager {
    ConnectionManager::new(redis::Client::open(s.url()).unwrap()).await.unwrap()
}

#[tokio::test]
async fn fence_refuses_a_corrupt_counter() {
    let s = server();
    let v = valkey(&s, "fencecorrupt").await;
    let store = LeaseStore::new(v.clone());
    let mut raw = raw(&s).await;
    let counter = format!("{}:lease:{{kiln}}:fence", v.prefix());
    for bad in ["xyz", "-3", "1e3", "99999999999999999999"] {
        let _: () = redis::cmd("SET").arg(&counter).arg(bad).query_async(&mut raw).await.unwrap();
        // A downstream check of `fence()` must not accept any token.
        match store.fence("kiln").await {
            Err(Error::LeaseCorrupt { name, .. }) => assert_eq!(name, "kiln"),
            other => panic!("counter {bad:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn one_counter_grammar_in_every_script_and_the_reader() {
    let s = server();
    let v = valkey(&s, "grammar").await;
    let store = LeaseStore::new(v.clone());
    let mut raw = raw(&s).await;
    let counter = format!("{}:lease:{{kiln}}:fence", v.prefix());
    let data = format!("{}:lease:{{kiln}}:data", v.prefix());
    let _: () = redis::cmd("SET").arg(&data).arg("before").query_async(&mut raw).await.unwrap();
    // Above 64 bits, above 2^53-1 (Lua numbers are doubles), leading zeros, empty, signs, spaces.
    for (i, bad) in
        ["99999999999999999999", "9007199254740992", "18446744073709551615", "007", "00", "", "+5", " 5", "5\n"]
            .into_iter()
            .enumerate()
    {
        let _: () = redis::cmd("SET").arg(&counter).arg(bad).query_async(&mut raw).await.unwrap();
        assert!(matches!(store.fence("kiln").await, Err(Error::LeaseCorrupt { .. })), "fence, counter {bad:?}");
        let got = store.fenced_write("kiln", 5, b"after").await;
        assert!(matches!(got, Err(Error::LeaseCorrupt { .. })), "fenced write, counter {bad:?}: {got:?}");
        let got = store.acquire("kiln", "alice", Duration::from_secs(5), &format!("g-{i}")).await;
        assert!(matches!(got, Err(Error::LeaseCorrupt { .. })), "acquire, counter {bad:?}: {got:?}");
        let left: String = redis::cmd("GET").arg(&counter).query_async(&mut raw).await.unwrap();
        assert_eq!(left, bad, "the counter is left as it was");
        assert_eq!(store.read_protected("kiln").await.unwrap().as_deref(), Some(b"before".as_slice()));
    }
    // The largest valid counter: read and compared exactly, never as a rounded double.
    let _: () = redis::cmd("SET").arg(&counter).arg("9007199254740991").query_async(&mut raw).await.unwrap();
    assert_eq!(store.fence("kiln").await.unwrap(), 9_007_199_254_740_991);
    match store.fenced_write("kiln", 9_007_199_254_740_990, b"stale").await {
        Err(Error::Fenced { highest, .. }) => assert_eq!(highest, 9_007_199_254_740_991),
        other => panic!("{other:?}"),
    }
    store.fenced_write("kiln", 9_007_199_254_740_991, b"newest").await.unwrap();
    assert_eq!(store.read_protected("kiln").await.unwrap().as_deref(), Some(b"newest".as_slice()));
    // No further token can be issued inside the grammar: acquire fails closed.
    let got = store.acquire("kiln", "alice", Duration::from_secs(5), "g-max").await;
    assert!(matches!(got, Err(Error::LeaseCorrupt { .. })), "{got:?}");
    assert_eq!(store.fence("kiln").await.unwrap(), 9_007_199_254_740_991, "fence unchanged");
    // "0" is canonical.
    let _: () = redis::cmd("SET").arg(&counter).arg("0").query_async(&mut raw).await.unwrap();
    assert_eq!(store.fence("kiln").await.unwrap(), 0);
    let l = acquired(store.acquire("kiln", "alice", Duration::from_secs(5), "g-zero").await.unwrap());
    assert_eq!(l.token, 1);
}

#[tokio::test]
async fn wrong_type_keys_are_typed_errors_in_every_lease_operation() {
    let s = server();
    let v = valkey(&s, "wrongtype").await;
    let store = LeaseStore::new(v.clone());
    let mut raw = raw(&s).await;
    let p = v.prefix().as_str();
    let (record, counter, data) =
        (format!("{p}:lease:{{vat}}"), format!("{p}:lease:{{vat}}:fence"), format!("{p}:lease:{{vat}}:data"));
    let wrong = |r: Result<(), Error>, key: &str, what: &str| match r {
        Err(Error::WrongType { key: k, .. }) => assert_eq!(k, key, "{what}"),
        other => panic!("{what}: {other:?}"),
    };
    let l = acquired(store.acquire("vat", "alice", Duration::from_secs(30), "w-1").await.unwrap());
    // The counter as a hash.
    let _: () = redis::cmd("DEL").arg(&counter).query_async(&mut raw).await.unwrap();
    let _: () = redis::cmd("HSET").arg(&counter).arg("n").arg("1").query_async(&mut raw).await.unwrap();
    wrong(store.fence("vat").await.map(drop), &counter, "fence");
    wrong(store.fenced_write("vat", l.token, b"x").await, &counter, "fenced write");
    store.release(&l, "w-2").await.unwrap();
    wrong(store.acquire("vat", "bob", Duration::from_secs(5), "w-3").await.map(drop), &counter, "acquire");
    let _: () = redis::cmd("DEL").arg(&counter).query_async(&mut raw).await.unwrap();
    // The protected data as a list: not read, not overwritten.
    let _: () = redis::cmd("RPUSH").arg(&data).arg("kept").query_async(&mut raw).await.unwrap();
    wrong(store.read_protected("vat").await.map(drop), &data, "read_protected");
    wrong(store.fenced_write("vat", 0, b"x").await, &data, "fenced write over a list");
    let kept: Vec<String> = redis::cmd("LRANGE").arg(&data).arg(0).arg(-1).query_async(&mut raw).await.unwrap();
    assert_eq!(kept, ["kept"]);
    // The record as a string.
    let _: () = redis::cmd("SET").arg(&record).arg("x").arg("PX").arg(30_000).query_async(&mut raw).await.unwrap();
    wrong(store.acquire("vat", "bob", Duration::from_secs(5), "w-4").await.map(drop), &record, "acquire");
    wrong(store.renew(&l, Duration::from_secs(5), "w-5").await.map(drop), &record, "renew");
    // A request cache of the wrong type: named without the request id.
    let cache = format!("{p}:lease:{{vat}}:req:w-6");
    let _: () = redis::cmd("SET").arg(&cache).arg("x").query_async(&mut raw).await.unwrap();
    match store.release(&l, "w-6").await {
        Err(e @ Error::WrongType { .. }) => {
            assert!(!format!("{e:?}{e}").contains("w-6"), "{e:?}");
            assert!(e.to_string().contains(&format!("{p}:lease:{{vat}}:req:")), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn release_cleans_up_a_wrong_type_record() {
    let s = server();
    let v = valkey(&s, "stuck").await;
    let store = LeaseStore::new(v.clone());
    let mut raw = raw(&s).await;
    let record = format!("{}:lease:{{silo}}", v.prefix());
    let l = acquired(store.acquire("silo", "alice", Duration::from_secs(30), "s-1").await.unwrap());
    for (i, junk) in ["SET", "RPUSH"].into_iter().enumerate() {
        let _: () = redis::cmd("DEL").arg(&record).query_async(&mut raw).await.unwrap();
        let _: () = redis::cmd(junk).arg(&record).arg("junk").query_async(&mut raw).await.unwrap();
        store.release(&l, &format!("s-r{i}")).await.unwrap();
        let exists: bool = redis::cmd("EXISTS").arg(&record).query_async(&mut raw).await.unwrap();
        assert!(!exists, "{junk}: the record was cleaned up");
    }
    let m = acquired(store.acquire("silo", "bob", Duration::from_secs(5), "s-2").await.unwrap());
    assert_eq!(m.token, l.token + 1);
}

#[tokio::test]
async fn granted_ttl_is_the_servers() {
    let s = server();
    let v = valkey(&s, "granted").await;
    let store = LeaseStore::new(v.clone());
    let mut raw = raw(&s).await;
    let record = format!("{}:lease:{{belt}}", v.prefix());
    let l = acquired(store.acquire("belt", "alice", Duration::from_micros(3_000_900), "t-1").await.unwrap());
    let held: u64 = redis::cmd("PTTL").arg(&record).query_async(&mut raw).await.unwrap();
    assert_eq!(l.ttl, Duration::from_millis(3000));
    assert!(Duration::from_millis(held) <= l.ttl, "{held} ms held, {:?} granted", l.ttl);
    let granted = store.renew(&l, Duration::from_micros(4_000_900), "t-2").await.unwrap();
    let held: u64 = redis::cmd("PTTL").arg(&record).query_async(&mut raw).await.unwrap();
    assert_eq!(granted, Duration::from_millis(4000));
    assert!(Duration::from_millis(held) <= granted && Duration::from_millis(held) > Duration::from_millis(3000));
}

#[tokio::test]
async fn damaged_dedupe_and_start_lease_keys_are_typed_errors() {
    let s = server();
    let v = valkey(&s, "dedupecorrupt").await;
    let d = ValkeyDedupe::new(v.clone(), LEASE, RETENTION);
    let mut raw = raw(&s).await;
    // A value we cannot read, or a claim that would never expire: corrupt,
    // and the key is left as it was.
    for (i, (bad, ttl)) in
        [("garbage", Some(60_000)), ("processing:", Some(60_000)), ("processing:x", None), ("DONE", None)]
            .into_iter()
            .enumerate()
    {
        let id = format!("e-{i}");
        let key = d.key("urn:c", &id).unwrap();
        let mut set = redis::cmd("SET");
        set.arg(&key).arg(bad);
        if let Some(ms) = ttl {
            set.arg("PX").arg(ms);
        }
        let _: () = set.query_async(&mut raw).await.unwrap();
        match d.claim("urn:c", &id, "tok").await {
            Err(Error::Corrupt { key: k, .. }) => assert_eq!(k, key),
            other => panic!("{bad:?}: {other:?}"),
        }
        // Neither marked done over it, nor given a time left.
        match d.mark_done("urn:c", &id).await {
            Err(Error::Corrupt { key: k, .. }) => assert_eq!(k, key),
            other => panic!("mark_done over {bad:?}: {other:?}"),
        }
        match d.lease_remaining("urn:c", &id).await {
            Err(Error::Corrupt { key: k, .. }) => assert_eq!(k, key),
            other => panic!("time left of {bad:?}: {other:?}"),
        }
        let held: String = redis::cmd("GET").arg(&key).query_async(&mut raw).await.unwrap();
        assert_eq!(held, bad, "nothing written");
        let pttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut raw).await.unwrap();
        assert_eq!(pttl < 0, ttl.is_none());
    }
    // A key of another type: WrongType from every call, and kept.
    let key = d.key("urn:c", "e-hash").unwrap();
    let _: () = redis::cmd("HSET").arg(&key).arg("f").arg("v").query_async(&mut raw).await.unwrap();
    let e = d.claim("urn:c", "e-hash", "tok").await.unwrap_err();
    assert!(matches!(&e, Error::WrongType { key: k, .. } if *k == key), "{e:?}");
    let e = d.mark_done("urn:c", "e-hash").await.unwrap_err();
    assert!(matches!(&e, Error::WrongType { key: k, .. } if *k == key), "{e:?}");
    let e = d.lease_remaining("urn:c", "e-hash").await.unwrap_err();
    assert!(matches!(&e, Error::WrongType { key: k, .. } if *k == key), "{e:?}");
    let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut raw).await.unwrap();
    assert_eq!(kind, "hash");
    // The start lease: a wrong-type key, and one without an expiry.
    let start = ValkeyStartLease::new(v.clone());
    let key = format!("{}:lock:poststart:cfg-hash", v.prefix());
    let _: () = redis::cmd("HSET").arg(&key).arg("f").arg("v").query_async(&mut raw).await.unwrap();
    let e = start.acquire("cfg-hash", Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(&e, Error::WrongType { key: k, .. } if *k == key), "{e:?}");
    let key = format!("{}:lock:poststart:cfg-forever", v.prefix());
    let _: () = redis::cmd("SET").arg(&key).arg("1").query_async(&mut raw).await.unwrap();
    let e = start.acquire("cfg-forever", Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(&e, Error::Corrupt { key: k, .. } if *k == key), "{e:?}");
}

/// Tests that stop, restart or cut their server, kill its clients or count
/// its commands: each starts a server of its own (the cluster suite leaves
/// this module out).
mod standalone {
    use super::*;

    use microdcs_tests::own_server as server;

    #[tokio::test]
    async fn acquire_cut_after_sending_is_retried_by_request_id() {
        let s = server();
        let proxy = FaultProxy::start(s.host_port()).await;
        let prefix = unique_prefix("cut");
        let through = Valkey::connect_url(&proxy.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
        let direct = LeaseStore::new(Valkey::connect_url(s.url(), prefix, WriteOptions::default()).await.unwrap());
        let store = LeaseStore::new(through.clone());
        // Load the script first so the cut hits the acquire itself.
        let warm = acquired(store.acquire("warm", "w", Duration::from_secs(5), "warm-1").await.unwrap());
        store.release(&warm, "warm-2").await.unwrap();
        proxy.cut_after_request_containing(b"EVALSHA").await;
        let first = acquired(store.acquire("press", "alice", Duration::from_secs(30), "acq-1").await.unwrap());
        assert_eq!(proxy.cuts(), 1, "the reply was lost");
        assert_eq!(through.metrics().write_retries(), 1);
        // Another explicit retry with the same request id: the same lease.
        let again = acquired(direct.acquire("press", "alice", Duration::from_secs(30), "acq-1").await.unwrap());
        assert_eq!(Lease { ttl: first.ttl, ..again.clone() }, first, "the same grant");
        assert!(again.ttl <= first.ttl, "with the time it has left: {again:?}");
        assert_eq!(direct.fence("press").await.unwrap(), 1, "the fence moved by exactly one");
    }

    #[tokio::test]
    async fn lease_calls_out_of_attempts_end_with_unknown_outcome() {
        let s = server();
        let proxy = FaultProxy::start(s.host_port()).await;
        let once = WriteOptions { attempts: 1, ..WriteOptions::default() };
        let through = Valkey::connect_url(&proxy.url(), unique_prefix("unknown"), once).await.unwrap();
        let store = LeaseStore::new(through.clone());
        // Load the scripts first so each cut hits the call itself.
        let l = acquired(store.acquire("press", "alice", Duration::from_secs(30), "u-1").await.unwrap());
        store.fenced_write("press", l.token, b"v").await.unwrap();
        let record = format!("{}:lease:{{press}}", through.prefix());
        let fence = format!("{}:lease:{{press}}:fence", through.prefix());
        proxy.cut_after_request_containing(b"EVALSHA").await;
        match store.renew(&l, Duration::from_secs(30), "u-2").await {
            Err(Error::UnknownOutcome { key, attempts, .. }) => {
                assert_eq!((key.as_str(), attempts), (record.as_str(), 1))
            }
            other => panic!("renew: {other:?}"),
        }
        proxy.cut_after_request_containing(b"EVALSHA").await;
        match store.fenced_write("press", l.token, b"w").await {
            Err(Error::UnknownOutcome { key, attempts, .. }) => {
                assert_eq!((key.as_str(), attempts), (fence.as_str(), 1))
            }
            other => panic!("fenced write: {other:?}"),
        }
        assert_eq!(proxy.cuts(), 2);
    }
}
