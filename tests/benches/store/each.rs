//! `-- --each`: the server time of a write to a type with a multi-valued
//! index (`each(...)`), by how many of its values change, against the same
//! write of a document with no values, in rounds so all see the same
//! machine.

use microdcs_tests::command_usec;
use microdcs_tests::fixtures::{Article, Extras};
use microdcs_valkey::client::Connection;
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::testing::{ValkeyServer, unique_prefix};
use microdcs_valkey::{PutOutcome, Valkey, config::WriteOptions};

use super::median;

fn article(id: &str, tags: &[String]) -> Article {
    Article { id: id.into(), scope: "s1".into(), title: "a title".into(), tags: tags.to_vec() }
}

pub(super) async fn each(server: &ValkeyServer, quick: bool) {
    let mut stats = Connection::from(ConnectionManager::new(super::network::client(server.url())).await.unwrap());
    let valkey = Valkey::connect_url(server.url(), unique_prefix("each"), WriteOptions::default()).await.unwrap();
    let store = Extras::open(valkey).store::<Article>();
    let tags = |first: usize, n: usize| (first..first + n).map(|i| format!("tag-{i}")).collect::<Vec<_>>();
    // (what, document id, the tags of even and of odd writes)
    let cases: [(&str, &str, Vec<String>, Vec<String>); 4] = [
        ("no values", "a-0", vec![], vec![]),
        ("4 values, none changes", "a-1", tags(0, 4), tags(0, 4)),
        ("4 values, 2 change each write", "a-2", tags(0, 4), tags(2, 4)),
        ("16 values, all change each write", "a-3", tags(0, 16), tags(16, 16)),
    ];
    let mut reads = Vec::new();
    for (_, id, even, _) in &cases {
        assert_eq!(store.create(&article(id, even)).await.unwrap(), PutOutcome::Written { version: 1 });
        reads.push(store.get_in("s1", id).await.unwrap().unwrap());
    }
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..if quick { 3 } else { 10 } {
        for (i, (_, id, even, odd)) in cases.iter().enumerate() {
            let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut stats).await.unwrap();
            for n in 0..200 {
                let next = article(id, if n % 2 == 0 { odd } else { even });
                let out = store.update_in_place(&mut reads[i], next).await.unwrap();
                assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
            }
            let (calls, usec) = command_usec(&mut stats).await.get("evalsha").copied().unwrap_or((0, 0));
            per[i].push(usec as f64 / calls.max(1) as f64);
        }
    }
    let base = median(per[0].clone());
    println!("\n## A multi-valued index (`each`): server time per update (`commandstats`, median of rounds of 200)\n");
    println!("| update of an article | us per call | ratio |");
    println!("|---|---|---|");
    for ((what, ..), times) in cases.iter().zip(per) {
        let t = median(times);
        println!("| {what} | {t:.1} | {:.2} |", t / base);
    }
}
