//! Typed operations on the declared families of a keyspace, one family
//! type per test, against a real Valkey: what `keyspace!` hands out for
//! `set`, `string`, `counter`, `hash`, `zset` and `channel` families.

use std::time::Duration;

use futures_util::StreamExt;
use microdcs_tests::fixtures::{Plant, PlantHandle};
use microdcs_tests::{server, unique_prefix};
use microdcs_valkey::redis::{self, AsyncCommands, aio::ConnectionManager};
use microdcs_valkey::testing::ValkeyServer;
use microdcs_valkey::{Error, KeyPrefix, Page, Valkey, config::WriteOptions, families::Scored};

struct Env {
    _server: ValkeyServer,
    plant: PlantHandle,
    prefix: KeyPrefix,
    raw: ConnectionManager,
    url: String,
}

async fn env(name: &str) -> Env {
    let server = server();
    let prefix = unique_prefix(name);
    let valkey = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    // The test's own commands (a ZADD of a page and more) are not the
    // library's bounds: wait for them as long as a busy machine needs.
    let config = redis::aio::ConnectionManagerConfig::new().set_response_timeout(Some(Duration::from_secs(60)));
    let raw = ConnectionManager::new_with_config(redis::Client::open(server.url()).unwrap(), config).await.unwrap();
    Env { url: server.url().to_owned(), _server: server, plant: Plant::open(valkey), prefix, raw }
}

#[tokio::test]
async fn set_family() {
    let mut e = env("fam-set").await;
    let refs = Plant::reference(&e.plant, "equipment", "s1").unwrap();
    assert_eq!(refs.key(), format!("{}:ref:equipment:s1", e.prefix.as_str()));
    assert_eq!(refs.add(&["m-1", "m-2", "m-1"]).await.unwrap(), 2);
    assert_eq!(refs.add(&["m-2", "m-3"]).await.unwrap(), 1, "a repeated add changes nothing");
    assert!(refs.contains("m-3").await.unwrap());
    assert!(!refs.contains("m-9").await.unwrap());
    assert_eq!(refs.remove(&["m-3", "m-9"]).await.unwrap(), 1);
    assert_eq!(refs.count().await.unwrap(), 2);
    let many: Vec<String> = (0..250).map(|i| format!("x-{i}")).collect();
    refs.add(&many).await.unwrap();
    let (mut seen, mut page) = (Vec::new(), Some(Page::first(40)));
    while let Some(p) = page {
        let got = refs.members(p).await.unwrap();
        assert!(got.ids.len() <= 40);
        seen.extend(got.ids);
        page = got.next;
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 252, "every member, once");
    // Values are encoded like document placeholders; an empty one is refused.
    assert!(matches!(Plant::reference(&e.plant, "", "s1"), Err(Error::Key(_))));
    // A key of another type: typed error, nothing changed.
    let other = Plant::reference(&e.plant, "equipment", "s2").unwrap();
    let _: () = e.raw.set(other.key(), "junk").await.unwrap();
    assert!(matches!(other.add(&["m-1"]).await, Err(Error::WrongType { .. })));
    assert!(matches!(other.count().await, Err(Error::WrongType { .. })));
    let still: String = e.raw.get(other.key()).await.unwrap();
    assert_eq!(still, "junk");
}

#[tokio::test]
async fn string_family() {
    let mut e = env("fam-value").await;
    // A text value: the heartbeat family.
    let beat = Plant::sfc_heartbeat(&e.plant).unwrap();
    assert_eq!(beat.get().await.unwrap(), None);
    assert!(beat.set_if_absent("5", None).await.unwrap());
    assert!(!beat.set_if_absent("7", None).await.unwrap(), "already set");
    assert_eq!(beat.get().await.unwrap().as_deref(), Some("5"));
    assert_eq!(beat.ttl().await.unwrap(), None);
    beat.set("6", Some(Duration::from_secs(60))).await.unwrap();
    let ttl = beat.ttl().await.unwrap().unwrap();
    assert!(ttl > Duration::from_secs(55) && ttl <= Duration::from_secs(60), "{ttl:?}");
    beat.set("6", None).await.unwrap();
    assert_eq!(beat.ttl().await.unwrap(), None, "a set without a lifetime removes it");
    assert!(beat.delete().await.unwrap());
    assert!(!beat.delete().await.unwrap());
    assert!(matches!(beat.set("1", Some(Duration::ZERO)).await, Err(Error::InvalidArgument(_))));
    // A lifetime expires.
    beat.set("t", Some(Duration::from_millis(200))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(beat.get().await.unwrap(), None);
    // Bytes that are not UTF-8 are corrupt, not mangled.
    let _: () = e.raw.set(beat.key(), &[0xff_u8, 0xfe][..]).await.unwrap();
    assert!(matches!(beat.get().await, Err(Error::Corrupt { .. })));
}

#[tokio::test]
async fn typed_value_family() {
    let mut e = env("fam-typed").await;
    // `value<u32>`: the job acceptance limit, stored as its decimal text.
    let limit = Plant::job_acceptance(&e.plant, "s1").unwrap();
    assert_eq!(limit.get().await.unwrap(), None);
    assert!(limit.set_if_absent(&5, None).await.unwrap());
    assert!(!limit.set_if_absent(&7, None).await.unwrap(), "already set");
    assert_eq!(limit.get().await.unwrap(), Some(5_u32));
    let text: String = e.raw.get(limit.key()).await.unwrap();
    assert_eq!(text, "5", "as any other client would write it");
    limit.set(&6, Some(Duration::from_secs(60))).await.unwrap();
    let ttl = limit.ttl().await.unwrap().unwrap();
    assert!(ttl > Duration::from_secs(55) && ttl <= Duration::from_secs(60), "{ttl:?}");
    assert_eq!(limit.get().await.unwrap(), Some(6));
    assert!(limit.delete().await.unwrap());
    assert_eq!(limit.get().await.unwrap(), None);
    // A stored text that is no u32 is corrupt, never a default.
    for junk in ["-1", "4294967296", "ten", ""] {
        let _: () = e.raw.set(limit.key(), junk).await.unwrap();
        assert!(matches!(limit.get().await, Err(Error::Corrupt { .. })), "{junk:?}");
    }
    // Never replaces or removes a key of another type.
    let _: () = e.raw.del(limit.key()).await.unwrap();
    let _: () = e.raw.sadd(limit.key(), "x").await.unwrap();
    assert!(matches!(limit.set(&1, None).await, Err(Error::WrongType { .. })));
    assert!(matches!(limit.set_if_absent(&1, None).await, Err(Error::WrongType { .. })));
    assert!(matches!(limit.delete().await, Err(Error::WrongType { .. })));
    assert!(matches!(limit.get().await, Err(Error::WrongType { .. })));
    let kind: String = redis::cmd("TYPE").arg(limit.key()).query_async(&mut e.raw).await.unwrap();
    assert_eq!(kind, "set");
}

#[tokio::test]
async fn counter_family() {
    let mut e = env("fam-counter").await;
    let seq = Plant::pubseq(&e.plant, "s1").unwrap();
    assert_eq!(seq.get().await.unwrap(), 0);
    assert_eq!(seq.increment(1).await.unwrap(), 1);
    assert_eq!(seq.increment(10).await.unwrap(), 11);
    assert_eq!(seq.increment(-2).await.unwrap(), 9);
    assert_eq!(seq.get().await.unwrap(), 9);
    // Concurrent increments all count.
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let seq = seq.clone();
            tokio::spawn(async move { seq.increment(1).await.unwrap() })
        })
        .collect();
    let mut got = Vec::new();
    for t in tasks {
        got.push(t.await.unwrap());
    }
    got.sort_unstable();
    assert_eq!(got, (10..30).collect::<Vec<_>>(), "each increment saw its own count");
    // A stored value that is not a count: corrupt, and left as it was.
    let bad = Plant::pubseq(&e.plant, "s2").unwrap();
    let _: () = e.raw.set(bad.key(), "seven").await.unwrap();
    assert!(matches!(bad.get().await, Err(Error::Corrupt { .. })));
    assert!(matches!(bad.increment(1).await, Err(Error::Corrupt { .. })));
    let still: String = e.raw.get(bad.key()).await.unwrap();
    assert_eq!(still, "seven");
    // Texts the server would not count are corrupt here too.
    for text in ["+5", "007", "-0", "5 "] {
        let _: () = e.raw.set(bad.key(), text).await.unwrap();
        assert!(matches!(bad.get().await, Err(Error::Corrupt { .. })), "{text}");
    }
    // Overflow is the caller's argument, refused, not wrapped.
    let _: () = e.raw.set(bad.key(), i64::MAX).await.unwrap();
    assert!(matches!(bad.increment(1).await, Err(Error::InvalidArgument(_))));
    assert_eq!(bad.get().await.unwrap(), i64::MAX);
}

#[tokio::test]
async fn hash_family() {
    let e = env("fam-hash").await;
    let cursors = Plant::publisher_cursors(&e.plant).unwrap();
    assert_eq!(cursors.get("s1").await.unwrap(), None);
    assert!(cursors.set("s1", "1700000000000-0").await.unwrap());
    assert!(!cursors.set("s1", "1700000000001-0").await.unwrap(), "an existing field");
    assert_eq!(cursors.get("s1").await.unwrap().as_deref(), Some("1700000000001-0"));
    for i in 0..300 {
        cursors.set(&format!("t{i}"), &i.to_string()).await.unwrap();
    }
    assert_eq!(cursors.count().await.unwrap(), 301);
    let (mut all, mut cursor) = (Vec::new(), Some(0));
    while let Some(c) = cursor {
        let page = cursors.entries(c, 50).await.unwrap();
        all.extend(page.entries);
        cursor = page.next;
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 301);
    assert!(all.contains(&("t42".to_owned(), "42".to_owned())));
    assert!(cursors.delete("s1").await.unwrap());
    assert!(!cursors.delete("s1").await.unwrap());
}

#[tokio::test]
async fn typed_hash_family() {
    let mut e = env("fam-thash").await;
    let extras = microdcs_tests::fixtures::Extras::open(e.plant.valkey().clone());
    let tallies = microdcs_tests::fixtures::Extras::tallies(&extras, "s1").unwrap();
    let ada = "ada".to_owned();
    assert_eq!(tallies.get(&ada).await.unwrap(), None);
    assert!(tallies.set(&ada, &3).await.unwrap());
    assert!(!tallies.set(&ada, &4).await.unwrap());
    assert_eq!(tallies.get(&ada).await.unwrap(), Some(4_u64));
    for i in 0..120_u64 {
        let _ = tallies.set(&format!("u{i}"), &i).await.unwrap();
    }
    let (mut all, mut cursor) = (Vec::new(), Some(0));
    while let Some(c) = cursor {
        let page = tallies.entries(c, 50).await.unwrap();
        all.extend(page.entries);
        cursor = page.next;
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 121);
    assert!(all.contains(&("u42".to_owned(), 42)));
    assert!(tallies.delete(&ada).await.unwrap());
    assert_eq!(tallies.count().await.unwrap(), 120);
    // A stored value that is no u64 is corrupt, in a read and in a page.
    let _: () = e.raw.hset(tallies.key(), "bad", "-1").await.unwrap();
    assert!(matches!(tallies.get(&"bad".to_owned()).await, Err(Error::Corrupt { .. })));
    let mut failed = false;
    let mut cursor = Some(0);
    while let Some(c) = cursor {
        match tallies.entries(c, 50).await {
            Ok(page) => cursor = page.next,
            Err(err) => {
                assert!(matches!(err, Error::Corrupt { .. }), "{err}");
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the page holding it is refused");
}

#[tokio::test]
async fn typed_channel_family() {
    let e = env("fam-tchannel").await;
    let extras = microdcs_tests::fixtures::Extras::open(e.plant.valkey().clone());
    let ticks = microdcs_tests::fixtures::Extras::ticks(&extras, "s1").unwrap();
    let mut sub = ticks.subscribe().await.unwrap();
    for n in [1_u64, 2, 3] {
        assert_eq!(ticks.publish(&n).await.unwrap(), 1);
    }
    for n in [1_u64, 2, 3] {
        assert_eq!(sub.next(Duration::from_secs(5)).await.unwrap(), Some(n));
    }
    assert_eq!(sub.next(Duration::from_millis(50)).await.unwrap(), None, "nothing more");
    // A message that is no u64, sent by another client: an error, then the next message.
    let mut con = e.plant.valkey().connection();
    let _: u64 = redis::cmd("PUBLISH").arg(ticks.channel()).arg("ten").query_async(&mut con).await.unwrap();
    assert_eq!(ticks.publish(&4).await.unwrap(), 1);
    assert!(matches!(sub.next(Duration::from_secs(5)).await, Err(Error::Corrupt { .. })));
    assert_eq!(sub.next(Duration::from_secs(5)).await.unwrap(), Some(4));
}

#[tokio::test]
async fn a_list_bounded_by_bytes() {
    let mut e = env("fam-bytes").await;
    let x = microdcs_tests::fixtures::Extras::open(e.plant.valkey().clone());
    let buf = microdcs_tests::fixtures::Extras::overflow(&x, "s1").unwrap();
    // 250 values of 10 bytes against a 1,000-byte budget: the newest 100.
    let mut evicted = 0;
    for i in 0..250 {
        evicted += buf.push_bounded_bytes(&format!("event-{i:04}"), 1000).await.unwrap();
    }
    assert_eq!(evicted, 150);
    assert_eq!(buf.len().await.unwrap(), 100);
    let all = buf.range(0, -1).await.unwrap();
    assert_eq!((all[0].as_str(), all[99].as_str()), ("event-0249", "event-0150"));
    let bytes: usize = all.iter().map(String::len).sum();
    assert!(bytes <= 1000);
    // A large value evicts as many as it needs; one over the budget is refused.
    assert_eq!(buf.push_bounded_bytes(&"x".repeat(995), 1000).await.unwrap(), 100);
    assert_eq!(buf.range(0, -1).await.unwrap().len(), 1);
    assert!(buf.push_bounded_bytes(&"y".repeat(1001), 1000).await.unwrap_err().is_invalid_input());
    assert!(buf.push_bounded_bytes("z", 0).await.unwrap_err().is_invalid_input());
    assert_eq!(buf.len().await.unwrap(), 1, "nothing written by a refused push");
    // A key of another type: refused, nothing written.
    let other = microdcs_tests::fixtures::Extras::overflow(&x, "s2").unwrap();
    let _: () = e.raw.set(other.key(), "junk").await.unwrap();
    assert!(matches!(other.push_bounded_bytes("a", 10).await, Err(Error::WrongType { .. })));
}

#[tokio::test]
async fn families_with_a_declared_lifetime() {
    use microdcs_tests::fixtures::Extras;
    let mut e = env("fam-ttl").await;
    let x = Extras::open(e.plant.valkey().clone());
    let fresh = |t: Option<Duration>| t.is_some_and(|t| t > Duration::from_secs(25) && t <= Duration::from_secs(30));
    let seen = Extras::seen(&x, "s1").unwrap();
    assert_eq!(seen.add(&["a", "b"]).await.unwrap(), 2);
    assert!(fresh(seen.ttl().await.unwrap()), "set add");
    let _: () = redis::cmd("PERSIST").arg(seen.key()).query_async(&mut e.raw).await.unwrap();
    assert_eq!(seen.remove(&["a"]).await.unwrap(), 1);
    assert!(fresh(seen.ttl().await.unwrap()), "set remove gives it again");
    let recent = Extras::recent(&x, "s1").unwrap();
    assert!(recent.add("j-1", 1.0).await.unwrap());
    assert!(fresh(recent.ttl().await.unwrap()), "zset add");
    let _: () = redis::cmd("PERSIST").arg(recent.key()).query_async(&mut e.raw).await.unwrap();
    let _ = recent.add_bounded("j-2", 2.0, 5).await.unwrap();
    assert!(fresh(recent.ttl().await.unwrap()), "zset bounded add");
    let trail = Extras::trail(&x, "s1").unwrap();
    let _ = trail.push_bounded("v", 10).await.unwrap();
    assert!(fresh(trail.ttl().await.unwrap()), "list push");
    let hits = Extras::hits(&x, "s1").unwrap();
    assert_eq!(hits.increment(2).await.unwrap(), 2);
    let pttl: i64 = redis::cmd("PTTL").arg(hits.key()).query_async(&mut e.raw).await.unwrap();
    assert!(pttl > 25_000 && pttl <= 30_000, "counter increment: {pttl}");
    let note = Extras::note(&x, "s1").unwrap();
    note.set(&7, None).await.unwrap();
    assert!(fresh(note.ttl().await.unwrap()), "a value set without a lifetime takes the family's");
    note.set(&8, Some(Duration::from_secs(600))).await.unwrap();
    assert!(note.ttl().await.unwrap().is_some_and(|t| t > Duration::from_secs(500)), "one given wins");
    let observed = Extras::observed(&x, "s1").unwrap();
    assert!(observed.set("pod-a", "k-1").await.unwrap());
    assert!(fresh(observed.ttl().await.unwrap()), "hash set");
    // A key of another type: refused, and its lifetime left alone.
    let other = Extras::seen(&x, "s2").unwrap();
    let _: () = e.raw.set(other.key(), "junk").await.unwrap();
    assert!(matches!(other.add(&["a"]).await, Err(Error::WrongType { .. })));
    let pttl: i64 = redis::cmd("PTTL").arg(other.key()).query_async(&mut e.raw).await.unwrap();
    assert_eq!(pttl, -1, "no expiry set on a key the write refused");
    let hits2 = Extras::hits(&x, "s2").unwrap();
    let _: () = e.raw.sadd(hits2.key(), "x").await.unwrap();
    assert!(matches!(hits2.increment(1).await, Err(Error::WrongType { .. })));
}

#[tokio::test]
async fn sorted_set_family() {
    let e = env("fam-zset").await;
    let extras = microdcs_tests::fixtures::Extras::open(e.plant.valkey().clone());
    let due = microdcs_tests::fixtures::Extras::canary_runs(&extras, "s1", "due").unwrap();
    for (m, s) in [("j-1", 30.0), ("j-2", 10.0), ("j-3", 20.0), ("j-4", 40.0)] {
        assert!(due.add(m, s).await.unwrap());
    }
    assert!(!due.add("j-4", 45.0).await.unwrap(), "moved, not new");
    assert_eq!(due.score("j-4").await.unwrap(), Some(45.0));
    assert_eq!(due.score("j-9").await.unwrap(), None);
    let names = |v: Vec<Scored>| v.into_iter().map(|s| s.member).collect::<Vec<_>>();
    // Due by 25: the two earliest, oldest first; newest first in reverse.
    assert_eq!(names(due.range_by_score(f64::NEG_INFINITY, 25.0, false, 100).await.unwrap()), ["j-2", "j-3"]);
    assert_eq!(names(due.range_by_score(15.0, f64::INFINITY, true, 2).await.unwrap()), ["j-4", "j-1"]);
    assert_eq!(names(due.range_by_rank(0, 0, false).await.unwrap()), ["j-2"]);
    assert_eq!(due.range_by_rank(0, 0, true).await.unwrap(), [Scored { member: "j-4".into(), score: 45.0 }]);
    assert!(due.remove("j-2").await.unwrap());
    assert_eq!(due.count().await.unwrap(), 3);
    assert!(matches!(due.add("j-5", f64::NAN).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(due.range_by_score(f64::NAN, 1.0, false, 1).await, Err(Error::InvalidArgument(_))));
    // Bounded: keeps the `max` highest scores, trimmed in the same script.
    let runs = microdcs_tests::fixtures::Extras::canary_runs(&extras, "s1", "canary").unwrap();
    for i in 0..10 {
        runs.add_bounded(&format!("r-{i}"), f64::from(i), 4).await.unwrap();
    }
    assert_eq!(runs.count().await.unwrap(), 4);
    assert_eq!(names(runs.range_by_rank(0, -1, false).await.unwrap()), ["r-6", "r-7", "r-8", "r-9"]);
    assert_eq!(names(runs.range_by_rank(0, -2, false).await.unwrap()), ["r-6", "r-7", "r-8"]);
    assert_eq!(names(runs.range_by_rank(-2, -1, true).await.unwrap()), ["r-7", "r-6"]);
    assert_eq!(names(runs.range_by_rank(i64::MIN, i64::MAX, true).await.unwrap()), ["r-9", "r-8", "r-7", "r-6"]);
    // At most a page, whatever the signs.
    let big = microdcs_tests::fixtures::Extras::canary_runs(&extras, "s1", "big").unwrap();
    let mut raw = e.raw.clone();
    let members: Vec<(f64, String)> = (0..Page::MAX + 10).map(|i| (i as f64, format!("m-{i}"))).collect();
    let _: () = redis::cmd("ZADD").arg(big.key()).arg(&members).query_async(&mut raw).await.unwrap();
    for (start, stop) in [(0, -1), (-1_000_000, 1_000_000), (-500_000, -1)] {
        let got = big.range_by_rank(start, stop, false).await.unwrap();
        assert_eq!((got.len(), got[0].member.as_str()), (Page::MAX, "m-0"), "{start}..{stop}");
    }
    let _: () = raw.del(big.key()).await.unwrap();
    assert_eq!(runs.add_bounded("r-0", 0.5, 4).await.unwrap(), 1, "a low score is evicted at once");
    assert!(matches!(runs.add_bounded("r-x", 1.0, 0).await, Err(Error::InvalidArgument(_))));
}

#[tokio::test]
async fn channel_family() {
    let e = env("fam-channel").await;
    let nudge = Plant::nudge(&e.plant, "jobresponse").unwrap();
    assert_eq!(nudge.channel(), format!("{}:nudge:jobresponse", e.prefix.as_str()));
    assert_eq!(nudge.publish("nobody").await.unwrap(), 0);
    let client = redis::Client::open(e.url.as_str()).unwrap();
    let mut sub = client.get_async_pubsub().await.unwrap();
    sub.subscribe(nudge.channel()).await.unwrap();
    assert_eq!(nudge.publish("s1").await.unwrap(), 1);
    let msg = tokio::time::timeout(Duration::from_secs(2), sub.on_message().next()).await.expect("within 2 s");
    assert_eq!(msg.expect("subscribed").get_payload::<String>().unwrap(), "s1");
}

#[tokio::test]
async fn list_family() {
    use microdcs_tests::fixtures::Extras;
    let e = env("fam-list").await;
    let extras = Extras::open(e.plant.valkey().clone());
    let overflow = Extras::overflow(&extras, "s1").unwrap();
    for i in 0..10 {
        overflow.push_bounded(&format!("e-{i}"), 4).await.unwrap();
    }
    assert_eq!(overflow.len().await.unwrap(), 4, "bounded by the same script");
    assert_eq!(overflow.range(0, -1).await.unwrap(), ["e-9", "e-8", "e-7", "e-6"], "newest first");
    assert_eq!(overflow.range(0, 0).await.unwrap(), ["e-9"]);
    assert_eq!(overflow.range_from_oldest(0, -1).await.unwrap(), ["e-6", "e-7", "e-8", "e-9"], "oldest first");
    assert_eq!(overflow.range_from_oldest(0, 1).await.unwrap(), ["e-6", "e-7"]);
    assert_eq!(overflow.range_from_oldest(-1, -1).await.unwrap(), ["e-9"], "-1 from the tail is the newest");
    assert_eq!(overflow.range_from_oldest(2, 10).await.unwrap(), ["e-8", "e-9"]);
    // Windows of mixed signs are made whole against the length: "all but
    // the oldest" on a list far shorter than a page.
    assert_eq!(overflow.range(0, -2).await.unwrap(), ["e-9", "e-8", "e-7"]);
    assert_eq!(overflow.range(1, -2).await.unwrap(), ["e-8", "e-7"]);
    assert_eq!(overflow.range(-2, -1).await.unwrap(), ["e-7", "e-6"]);
    assert_eq!(overflow.range(-100, 1).await.unwrap(), ["e-9", "e-8"]);
    assert_eq!(overflow.range(3, 1).await.unwrap(), Vec::<String>::new());
    assert_eq!(overflow.range(i64::MIN, i64::MAX).await.unwrap().len(), 4);
    assert_eq!(overflow.range_from_oldest(0, -2).await.unwrap(), ["e-6", "e-7", "e-8"]);
    assert_eq!(overflow.range_from_oldest(-3, -2).await.unwrap(), ["e-7", "e-8"]);
    // At most a page, whatever the signs: the first `Page::MAX` from the start.
    let big = Extras::overflow(&extras, "big").unwrap();
    let values: Vec<String> = (0..Page::MAX + 10).map(|i| format!("b-{i}")).collect();
    let mut raw = e.raw.clone();
    let _: () = raw.rpush(big.key(), &values).await.unwrap();
    for (start, stop) in [(0, -1), (-500_000, -1), (-1_000_000, 1_000_000), (i64::MIN, i64::MAX)] {
        let got = big.range(start, stop).await.unwrap();
        assert_eq!((got.len(), got[0].as_str()), (Page::MAX, "b-0"), "{start}..{stop}");
        let got = big.range_from_oldest(start, stop).await.unwrap();
        assert_eq!((got.len(), got[0].as_str()), (Page::MAX, values[Page::MAX + 9].as_str()), "{start}..{stop}");
    }
    let _: () = raw.del(big.key()).await.unwrap();
    assert!(matches!(overflow.push_bounded("x", 0).await, Err(Error::InvalidArgument(_))));
    let other = Extras::overflow(&extras, "s2").unwrap();
    let mut raw = e.raw.clone();
    let _: () = raw.set(other.key(), "junk").await.unwrap();
    assert!(matches!(other.push_bounded("x", 3).await, Err(Error::WrongType { .. })));
    let still: String = raw.get(other.key()).await.unwrap();
    assert_eq!(still, "junk", "nothing written");
}

#[tokio::test]
async fn list_pops_and_byte_values() {
    use microdcs_tests::fixtures::Extras;
    let mut e = env("fam-list-pop").await;
    let extras = Extras::open(e.plant.valkey().clone());
    let queue = Extras::overflow(&extras, "s1").unwrap();
    for v in ["a", "b", "c", "d"] {
        queue.push_bounded(v, 10).await.unwrap();
    }
    // Pushed at the head: the oldest comes off the tail (a queue), the
    // newest off the head.
    assert_eq!(queue.pop_oldest().await.unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(queue.pop_newest().await.unwrap().as_deref(), Some(&b"d"[..]));
    assert_eq!(queue.range(0, -1).await.unwrap(), ["c", "b"]);
    assert_eq!(queue.pop_oldest().await.unwrap().as_deref(), Some(&b"b"[..]));
    assert_eq!(queue.pop_oldest().await.unwrap().as_deref(), Some(&b"c"[..]));
    assert_eq!(queue.pop_oldest().await.unwrap(), None, "empty");
    assert_eq!(queue.pop_newest().await.unwrap(), None);
    let exists: bool = e.raw.exists(queue.key()).await.unwrap();
    assert!(!exists, "the last pop leaves no key");
    // Bytes that are not UTF-8 round-trip through pushes, raw ranges and pops.
    let bin: &[u8] = &[0, 0xff, 0xfe, b':', 0x80];
    let other: Vec<u8> = vec![0xc3, 0x28];
    assert_eq!(queue.push_bounded(bin, 10).await.unwrap(), 1);
    assert_eq!(queue.push_bounded_bytes(&other, 100).await.unwrap(), 0);
    assert_eq!(queue.range_raw(0, -1).await.unwrap(), [other.clone(), bin.to_vec()]);
    assert_eq!(queue.range_from_oldest_raw(0, -1).await.unwrap(), [bin.to_vec(), other.clone()]);
    // Read as text, they are damage, not mangled text.
    assert!(matches!(queue.range(0, -1).await, Err(Error::Corrupt { .. })));
    assert_eq!(queue.len().await.unwrap(), 2, "a refused read takes nothing");
    assert_eq!(queue.pop_oldest().await.unwrap(), Some(bin.to_vec()));
    assert_eq!(queue.pop_newest().await.unwrap(), Some(other));
    // A family with a lifetime gets it again from a pop, as from every write.
    let trail = Extras::trail(&extras, "s1").unwrap();
    for v in ["x", "y"] {
        trail.push_bounded(v, 10).await.unwrap();
    }
    let _: () = redis::cmd("PERSIST").arg(trail.key()).query_async(&mut e.raw).await.unwrap();
    assert_eq!(trail.pop_oldest().await.unwrap().as_deref(), Some(&b"x"[..]));
    let pttl: i64 = e.raw.pttl(trail.key()).await.unwrap();
    assert!(pttl > 25_000 && pttl <= 30_000, "pop: {pttl}");
    // A key of another type: refused, nothing taken.
    let junk = Extras::overflow(&extras, "s2").unwrap();
    let _: () = e.raw.set(junk.key(), "junk").await.unwrap();
    assert!(matches!(junk.pop_oldest().await, Err(Error::WrongType { .. })));
    assert!(matches!(junk.pop_newest().await, Err(Error::WrongType { .. })));
    let still: String = e.raw.get(junk.key()).await.unwrap();
    assert_eq!(still, "junk");
}

#[tokio::test]
async fn hash_set_many() {
    use microdcs_tests::fixtures::Extras;
    let mut e = env("fam-hash-many").await;
    let cursors = Plant::publisher_cursors(&e.plant).unwrap();
    assert!(cursors.set("s1", "0-1").await.unwrap());
    assert_eq!(cursors.set_many(&[("s1", "1-1"), ("s2", "2-1"), ("s3", "3-1")]).await.unwrap(), 2, "two new");
    assert_eq!(cursors.set_many(&[("s4", "4-1"), ("s4", "4-2")]).await.unwrap(), 1, "the last value wins");
    let all: std::collections::BTreeMap<String, String> = e.raw.hgetall(cursors.key()).await.unwrap();
    assert_eq!(
        all,
        [("s1", "1-1"), ("s2", "2-1"), ("s3", "3-1"), ("s4", "4-2")].map(|(f, v)| (f.to_owned(), v.to_owned())).into()
    );
    let none: [(&str, &str); 0] = [];
    assert_eq!(cursors.set_many(&none).await.unwrap(), 0);
    // Typed fields and values.
    let extras = Extras::open(e.plant.valkey().clone());
    let tallies = Extras::tallies(&extras, "s1").unwrap();
    assert_eq!(tallies.set_many(&[("ada".to_owned(), 3), ("bob".to_owned(), 5)]).await.unwrap(), 2);
    assert_eq!(tallies.get(&"bob".to_owned()).await.unwrap(), Some(5));
    // A family with a lifetime gets it from the write.
    let observed = Extras::observed(&extras, "s1").unwrap();
    assert_eq!(observed.set_many(&[("pod-a", "k-1"), ("pod-b", "k-2")]).await.unwrap(), 2);
    let pttl: i64 = e.raw.pttl(observed.key()).await.unwrap();
    assert!(pttl > 25_000 && pttl <= 30_000, "set_many: {pttl}");
    // A key of another type: refused, nothing set.
    let other = Extras::observed(&extras, "s2").unwrap();
    let _: () = e.raw.set(other.key(), "junk").await.unwrap();
    assert!(matches!(other.set_many(&[("f", "v")]).await, Err(Error::WrongType { .. })));
    let still: String = e.raw.get(other.key()).await.unwrap();
    assert_eq!(still, "junk");
    let pttl: i64 = e.raw.pttl(other.key()).await.unwrap();
    assert_eq!(pttl, -1, "no lifetime set on a key the write refused");
}

#[tokio::test]
async fn rate_limit_family() {
    use microdcs_tests::fixtures::Extras;
    use microdcs_valkey::{families::RateDecision, families::RateLimitKey};
    let e = env("fam-rate").await;
    let extras = Extras::open(e.plant.valkey().clone());
    let logins = Extras::logins(&extras, "s1", "ada").unwrap();
    // Long enough that a loaded machine stays inside it; the reset is
    // watched on a key of its own with a short window.
    let window = Duration::from_secs(2);
    for left in [2, 1, 0] {
        assert_eq!(logins.attempt(3, window).await.unwrap(), RateDecision::Allowed { remaining: left });
    }
    match logins.attempt(3, window).await.unwrap() {
        RateDecision::Limited { retry_after } => assert!(retry_after <= window, "{retry_after:?}"),
        other => panic!("the fourth attempt in the window: {other:?}"),
    }
    // Under a millisecond is what the server cannot hold: refused, not rounded.
    assert!(matches!(logins.attempt(3, Duration::from_micros(500)).await, Err(Error::InvalidArgument(_))));
    let quick = Extras::logins(&extras, "s1", "eve").unwrap();
    let short = Duration::from_millis(100);
    assert_eq!(quick.attempt(1, short).await.unwrap(), RateDecision::Allowed { remaining: 0 });
    tokio::time::sleep(short + Duration::from_millis(150)).await;
    assert_eq!(quick.attempt(1, short).await.unwrap(), RateDecision::Allowed { remaining: 0 }, "a new window");
    // Failures block for a doubling time, up to the longest.
    let (base, max) = (Duration::from_secs(1), Duration::from_millis(3500));
    assert_eq!(logins.fail(base, max).await.unwrap(), Duration::from_secs(1));
    assert_eq!(logins.fail(base, max).await.unwrap(), Duration::from_secs(2));
    assert_eq!(logins.fail(base, max).await.unwrap(), Duration::from_millis(3500));
    assert!(matches!(logins.attempt(100, window).await.unwrap(), RateDecision::Limited { .. }), "blocked");
    logins.succeed().await.unwrap();
    assert!(matches!(logins.attempt(100, window).await.unwrap(), RateDecision::Allowed { .. }), "unblocked");
    assert_eq!(logins.fail(base, max).await.unwrap(), base, "failures counted afresh");
    // Damaged state: corrupt, nothing changed.
    let other = Extras::logins(&extras, "s1", "bob").unwrap();
    let mut raw = e.raw.clone();
    let _: () = raw.hset(other.key(), "n", "lots").await.unwrap();
    assert!(matches!(other.attempt(3, window).await, Err(Error::Corrupt { .. })));
    let n: String = raw.hget(other.key(), "n").await.unwrap();
    assert_eq!(n, "lots");
    // Numbers past what the script counts exactly are damage too, for
    // every mode, and nothing is written.
    for (field, huge) in [("w", "99999999999999999999"), ("b", "1000000000000000"), ("n", "18446744073709551616")] {
        let _: () = raw.del(other.key()).await.unwrap();
        let _: () = raw.hset(other.key(), field, huge).await.unwrap();
        assert!(matches!(other.attempt(3, window).await, Err(Error::Corrupt { .. })), "{field}");
        assert!(matches!(other.peek(3, window).await, Err(Error::Corrupt { .. })), "{field}");
        assert!(matches!(other.fail(base, max).await, Err(Error::Corrupt { .. })), "{field}");
        let left: std::collections::HashMap<String, String> = raw.hgetall(other.key()).await.unwrap();
        assert_eq!(left, [(field.to_owned(), huge.to_owned())].into(), "nothing written");
    }
    assert!(matches!(logins.attempt(0, window).await, Err(Error::InvalidArgument(_))));
    let over = RateLimitKey::MAX_LIMIT + 1;
    assert!(matches!(logins.attempt(over, window).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(logins.peek(u64::MAX, window).await, Err(Error::InvalidArgument(_))));
    assert!(logins.peek(RateLimitKey::MAX_LIMIT, window).await.is_ok());
}

/// A rate-limit key lives no longer than its window, block and failure
/// memory: after every operation it has a lifetime (`PTTL` > 0) or is
/// gone, never a key without one (`PTTL` -1), whatever the order.
#[tokio::test]
async fn every_rate_limit_write_leaves_a_bounded_lifetime() {
    use microdcs_tests::fixtures::Extras;
    let e = env("fam-rate-ttl").await;
    let extras = Extras::open(e.plant.valkey().clone());
    let mut raw = e.raw.clone();
    let window = Duration::from_secs(30);
    let (base, max) = (Duration::from_secs(1), Duration::from_secs(10));
    // A success with nothing to forget writes nothing.
    let never = Extras::logins(&extras, "s1", "never-failed").unwrap();
    never.succeed().await.unwrap();
    let pttl: i64 = raw.pttl(never.key()).await.unwrap();
    assert_eq!(pttl, -2, "a success on a key that never failed left a key");
    let k = Extras::logins(&extras, "s1", "ada").unwrap();
    let _ = k.attempt(3, window).await.unwrap();
    let pttl: i64 = raw.pttl(k.key()).await.unwrap();
    assert!(pttl > 0, "attempt: {pttl}");
    let _ = k.fail(base, max).await.unwrap();
    let pttl: i64 = raw.pttl(k.key()).await.unwrap();
    assert!(pttl > 0, "fail: {pttl}");
    k.succeed().await.unwrap();
    let pttl: i64 = raw.pttl(k.key()).await.unwrap();
    assert!(pttl > 0, "succeed after attempts (the window still counts): {pttl}");
    let _ = k.peek(3, window).await.unwrap();
    let pttl: i64 = raw.pttl(k.key()).await.unwrap();
    assert!(pttl > 0, "peek: {pttl}");
    k.reset().await.unwrap();
    let pttl: i64 = raw.pttl(k.key()).await.unwrap();
    assert_eq!(pttl, -2, "reset");
    // Failures alone, then a success: nothing is left to keep.
    let f = Extras::logins(&extras, "s1", "bob").unwrap();
    let _ = f.fail(base, max).await.unwrap();
    f.succeed().await.unwrap();
    let pttl: i64 = raw.pttl(f.key()).await.unwrap();
    assert!(pttl > 0 || pttl == -2, "succeed after failures only: {pttl}");
    // A hash an earlier version's success left without a lifetime goes
    // with the next success.
    let stale = Extras::logins(&extras, "s1", "stale").unwrap();
    let _: () = raw.hset_multiple(stale.key(), &[("f", 0), ("b", 0), ("fe", 0)]).await.unwrap();
    stale.succeed().await.unwrap();
    let pttl: i64 = raw.pttl(stale.key()).await.unwrap();
    assert_eq!(pttl, -2, "the stale hash is gone");
}

#[tokio::test]
async fn rate_limit_reset_forgets_the_window_and_the_failures() {
    use microdcs_tests::fixtures::Extras;
    use microdcs_valkey::families::RateDecision;
    let e = env("fam-rate-reset").await;
    let extras = Extras::open(e.plant.valkey().clone());
    let mut raw = e.raw.clone();
    let window = Duration::from_secs(30);
    let k = Extras::logins(&extras, "s1", "ada").unwrap();
    for _ in 0..2 {
        let _ = k.attempt(2, window).await.unwrap();
    }
    assert!(matches!(k.attempt(2, window).await.unwrap(), RateDecision::Limited { .. }), "window used up");
    // A success forgets failures, not the attempts of the window.
    k.succeed().await.unwrap();
    assert!(matches!(k.attempt(2, window).await.unwrap(), RateDecision::Limited { .. }), "still used up");
    let _ = k.fail(Duration::from_secs(5), Duration::from_secs(10)).await.unwrap();
    k.reset().await.unwrap();
    let exists: bool = raw.exists(k.key()).await.unwrap();
    assert!(!exists, "nothing kept");
    assert_eq!(k.attempt(2, window).await.unwrap(), RateDecision::Allowed { remaining: 1 }, "a new window");
    assert_eq!(k.fail(Duration::from_secs(1), Duration::from_secs(10)).await.unwrap(), Duration::from_secs(1));
    k.reset().await.unwrap();
    k.reset().await.unwrap();
    // Damaged state and a key of another type: typed, left as they are.
    let bad = Extras::logins(&extras, "s1", "bad").unwrap();
    let _: () = raw.hset(bad.key(), "n", "lots").await.unwrap();
    assert!(matches!(bad.reset().await, Err(Error::Corrupt { .. })));
    let n: String = raw.hget(bad.key(), "n").await.unwrap();
    assert_eq!(n, "lots");
    let other = Extras::logins(&extras, "s1", "other").unwrap();
    let _: () = raw.set(other.key(), "junk").await.unwrap();
    assert!(matches!(other.reset().await, Err(Error::WrongType { .. })));
    let still: String = raw.get(other.key()).await.unwrap();
    assert_eq!(still, "junk");
}

#[tokio::test]
async fn rate_limit_peek_counts_nothing() {
    use microdcs_tests::fixtures::Extras;
    use microdcs_valkey::families::RateDecision;
    let e = env("fam-rate-peek").await;
    let extras = Extras::open(e.plant.valkey().clone());
    let logins = Extras::logins(&extras, "s1", "ada").unwrap();
    let window = Duration::from_secs(30);
    // A fresh key: every attempt open, and looking creates nothing.
    assert_eq!(logins.peek(3, window).await.unwrap(), RateDecision::Allowed { remaining: 3 });
    let mut raw = e.raw.clone();
    let exists: bool = raw.exists(logins.key()).await.unwrap();
    assert!(!exists, "a peek writes nothing");
    for _ in 0..5 {
        assert_eq!(logins.peek(3, window).await.unwrap(), RateDecision::Allowed { remaining: 3 });
    }
    assert_eq!(logins.attempt(3, window).await.unwrap(), RateDecision::Allowed { remaining: 2 });
    // The peek agrees with what an attempt now would leave open.
    assert_eq!(logins.peek(3, window).await.unwrap(), RateDecision::Allowed { remaining: 2 });
    assert_eq!(logins.attempt(3, window).await.unwrap(), RateDecision::Allowed { remaining: 1 });
    assert_eq!(logins.attempt(3, window).await.unwrap(), RateDecision::Allowed { remaining: 0 });
    match logins.peek(3, window).await.unwrap() {
        RateDecision::Limited { retry_after } => assert!(retry_after <= window, "{retry_after:?}"),
        other => panic!("a used-up window: {other:?}"),
    }
    // A failure block shows as a wait, and is not extended by looking.
    let block = logins.fail(Duration::from_secs(5), Duration::from_secs(10)).await.unwrap();
    match logins.peek(100, window).await.unwrap() {
        RateDecision::Limited { retry_after } => assert!(retry_after <= block, "{retry_after:?}"),
        other => panic!("a block: {other:?}"),
    }
    let before: Vec<(String, String)> = raw.hgetall(logins.key()).await.unwrap();
    let _ = logins.peek(100, window).await.unwrap();
    let after: Vec<(String, String)> = raw.hgetall(logins.key()).await.unwrap();
    assert_eq!(before, after, "a peek changes no field");
    // Damaged state and bad arguments: typed errors.
    let other = Extras::logins(&extras, "s1", "bob").unwrap();
    let _: () = raw.hset(other.key(), "b", "soon").await.unwrap();
    assert!(matches!(other.peek(3, window).await, Err(Error::Corrupt { .. })));
    assert!(matches!(logins.peek(0, window).await, Err(Error::InvalidArgument(_))));
}

#[tokio::test]
async fn channel_subscription() {
    use microdcs_tests::fixtures::Extras;
    let e = env("fam-sub").await;
    let extras = Extras::open(e.plant.valkey().clone());
    let revocations = Extras::revocations(&extras, "s1").unwrap();
    let mut sub = revocations.subscribe().await.unwrap();
    let other = Extras::revocations(&extras, "s2").unwrap();
    let _ = other.publish("not for s1").await.unwrap();
    for i in 0..20 {
        assert_eq!(revocations.publish(&format!("session-{i}")).await.unwrap(), 1);
    }
    for i in 0..20 {
        assert_eq!(sub.next(Duration::from_secs(2)).await, Some(format!("session-{i}")), "in order");
    }
    assert_eq!(sub.next(Duration::from_millis(100)).await, None, "nothing from another channel");
    drop(sub);
    // The unsubscribe reaches the server on its own time: wait, bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while revocations.publish("late").await.unwrap() != 0 {
        assert!(std::time::Instant::now() < deadline, "dropping ends the subscription");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_heartbeat_on_the_servers_clock() {
    let mut e = env("fam-beat").await;
    let beat = Plant::sfc_heartbeat(&e.plant).unwrap();
    assert_eq!(beat.age().await.unwrap(), None, "never beaten");
    let at = beat.set_now(Some(Duration::from_secs(60))).await.unwrap();
    let (s, _us): (u64, u64) = redis::cmd("TIME").query_async(&mut e.raw).await.unwrap();
    assert!(at / 1000 <= s && s - at / 1000 <= 2, "the server's clock: {at} vs {s}");
    assert_eq!(beat.get().await.unwrap(), Some(at.to_string()));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let age = beat.age().await.unwrap().unwrap();
    assert!(age >= Duration::from_millis(100) && age < Duration::from_secs(5), "{age:?}");
    assert!(beat.ttl().await.unwrap().is_some());
    beat.set("not a time", None).await.unwrap();
    assert!(matches!(beat.age().await, Err(Error::Corrupt { .. })));
}

#[tokio::test]
async fn content_family() {
    let mut e = env("fam-content").await;
    let recipes = Plant::sfc_recipes(&e.plant).unwrap();
    let text = "step mix 5 min\nstep hold until ev\nstep fill";
    let digest = recipes.put(text).await.unwrap();
    assert_eq!(digest, microdcs_valkey::families::content_digest(text));
    assert_eq!(recipes.put(text).await.unwrap(), digest, "idempotent");
    assert_eq!(recipes.get(&digest).await.unwrap().as_deref(), Some(text));
    assert_eq!(recipes.get(&microdcs_valkey::families::content_digest("other")).await.unwrap(), None);
    assert!(matches!(recipes.get("not-a-digest").await, Err(Error::InvalidArgument(_))));
    // Tampered: read back refused, and a put of the true text does not hide it.
    let key = format!("{}:sfc:recipe:{digest}", e.prefix.as_str());
    let _: () = e.raw.set(&key, "step drain").await.unwrap();
    assert!(matches!(recipes.get(&digest).await, Err(Error::Corrupt { .. })));
    assert!(matches!(recipes.put(text).await, Err(Error::Corrupt { .. })));
    let still: String = e.raw.get(&key).await.unwrap();
    assert_eq!(still, "step drain", "left as found");
}

#[tokio::test]
async fn hash_increments_ranged_removals_and_counter_set() {
    use microdcs_tests::fixtures::Extras;
    let e = env("fam-more-ops").await;
    let extras = Extras::open(e.plant.valkey().clone());
    // HINCRBY: a missing field counts from 0; a field the server cannot
    // count from is corrupt, an overflow the caller's argument, and
    // neither changes anything.
    let cursors = Plant::publisher_cursors(&e.plant).unwrap();
    assert_eq!(cursors.increment("unread:ada", 3).await.unwrap(), 3);
    assert_eq!(cursors.increment("unread:ada", -1).await.unwrap(), 2);
    for text in ["not a number", "007", "+5", "99999999999999999999"] {
        cursors.set("name", text).await.unwrap();
        let err = cursors.increment("name", 1).await.unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{text}: {err:?}");
        assert_eq!(cursors.get("name").await.unwrap().as_deref(), Some(text), "nothing changed");
    }
    cursors.set("big", &i64::MAX.to_string()).await.unwrap();
    assert!(matches!(cursors.increment("big", 1).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(cursors.increment("fresh", i64::MIN).await, Ok(i64::MIN)));
    assert!(matches!(cursors.increment("fresh", -1).await, Err(Error::InvalidArgument(_))));
    assert_eq!(cursors.get("big").await.unwrap(), Some(i64::MAX.to_string()));
    assert_eq!(cursors.get("fresh").await.unwrap(), Some(i64::MIN.to_string()));
    // Sorted sets: remove a score range, then by rank.
    let runs = Extras::canary_runs(&extras, "s1", "more").unwrap();
    for (m, s) in [("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0), ("e", 5.0)] {
        runs.add(m, s).await.unwrap();
    }
    assert_eq!(runs.remove_by_score(2.0, 3.0).await.unwrap(), 2);
    assert_eq!(runs.remove_by_score(f64::NEG_INFINITY, 1.5).await.unwrap(), 1);
    assert!(matches!(runs.remove_by_score(f64::NAN, 1.0).await, Err(Error::InvalidArgument(_))));
    assert_eq!(runs.remove_by_rank(-1, -1).await.unwrap(), 1, "the highest");
    let left: Vec<String> = runs.range_by_rank(0, -1, false).await.unwrap().into_iter().map(|s| s.member).collect();
    assert_eq!(left, ["d"]);
    // Counters: set and reset; a key of another type is refused, not replaced.
    let seq = Plant::pubseq(&e.plant, "s1").unwrap();
    seq.set(41).await.unwrap();
    assert_eq!(seq.increment(1).await.unwrap(), 42);
    seq.reset().await.unwrap();
    assert_eq!(seq.get().await.unwrap(), 0);
    let other = Plant::pubseq(&e.plant, "s9").unwrap();
    let mut raw = e.raw.clone();
    let _: () = raw.sadd(other.key(), "x").await.unwrap();
    assert!(matches!(other.set(1).await, Err(Error::WrongType { .. })));
    let t: String = redis::cmd("TYPE").arg(other.key()).query_async(&mut raw).await.unwrap();
    assert_eq!(t, "set", "nothing replaced");
}
