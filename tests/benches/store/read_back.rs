//! `-- --read-back`: what the store's read-back check costs per put. A
//! write decodes the text it is about to store, so a document its codec
//! cannot read back (NaN, nesting past the reader's limit) is refused
//! instead of acknowledged. Measured in the same run: that decode alone
//! (the whole of the check), the encode beside it, and one caller's put
//! p50 through the store with the same codec, in alternating rounds.

use std::hint::black_box;
use std::time::{Duration, Instant};

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_valkey::testing::{ValkeyServer, unique_prefix};
use microdcs_valkey::{PutOutcome, Store, Valkey, config::WriteOptions, store::Codec, store::CompactJson, store::Json};

use super::{doc, median, pct, us};

/// A codec by name, its encode of the bench document and its read-back
/// check of a stored text.
type Measured<'a> = (&'static str, &'a dyn Fn() -> String, &'a dyn Fn(&str));

/// Microseconds per call of `f`, the median of `rounds` rounds of `n` calls.
fn per_call(rounds: usize, n: usize, mut f: impl FnMut()) -> f64 {
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        times.push(us(start.elapsed()) / n as f64);
    }
    median(times)
}

/// One caller's put p50 (an update of a known version) through `store`.
async fn put_p50<C: Codec<JobResponse>>(store: &Store<JobResponse, C>, id: usize, n: usize) -> f64 {
    let mut read = store.get(&format!("r-{id}")).await.unwrap().expect("created");
    let mut times: Vec<Duration> = Vec::with_capacity(n);
    for step in 0..n as u64 {
        let start = Instant::now();
        let out = store.update_in_place(&mut read, doc(id, step + 1)).await.unwrap();
        times.push(start.elapsed());
        assert!(matches!(out, PutOutcome::Written { .. }), "{out:?}");
    }
    times.sort();
    us(pct(&times, 0.5))
}

pub(super) async fn read_back(server: &ValkeyServer, quick: bool) {
    let valkey = Valkey::connect_url(server.url(), unique_prefix("readback"), WriteOptions::default()).await.unwrap();
    let plant = Plant::open(valkey);
    let (json, compact) = (plant.store_with::<JobResponse, _>(Json), plant.store_with::<JobResponse, _>(CompactJson));
    assert!(matches!(json.create(&doc(1, 0)).await.unwrap(), PutOutcome::Written { .. }));
    assert!(matches!(compact.create(&doc(2, 0)).await.unwrap(), PutOutcome::Written { .. }));
    let d = doc(1, 0);
    let (rounds, puts) = if quick { (3, 300) } else { (8, 1500) };

    let codecs: [Measured<'_>; 2] = [
        ("Json", &|| Json.encode_stored(&d, &d.id).unwrap(), &|t| {
            black_box(<Json as Codec<JobResponse>>::decode_stored(&Json, t, &d.id).unwrap());
        }),
        ("CompactJson", &|| CompactJson.encode_stored(&d, &d.id).unwrap(), &|t| {
            black_box(<CompactJson as Codec<JobResponse>>::decode_stored(&CompactJson, t, &d.id).unwrap());
        }),
    ];
    let mut put = [Vec::new(), Vec::new()];
    let mut encode = [Vec::new(), Vec::new()];
    let mut check = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (i, (_, enc, dec)) in codecs.iter().enumerate() {
            let text = enc();
            encode[i].push(per_call(1, 20_000, || {
                black_box(enc());
            }));
            check[i].push(per_call(1, 20_000, || dec(&text)));
        }
        put[0].push(put_p50(&json, 1, puts / rounds).await);
        put[1].push(put_p50(&compact, 2, puts / rounds).await);
    }
    println!("\n## The read-back check (`-- --read-back`): a job response, {rounds} alternating rounds (median)\n");
    println!("| codec | stored text bytes | encode µs | read-back check µs | put p50 µs | check / put |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, (name, enc, _)) in codecs.iter().enumerate() {
        let (e, c, p) = (median(encode[i].clone()), median(check[i].clone()), median(put[i].clone()));
        println!("| {name} | {} | {e:.2} | {c:.2} | {p:.1} | {:.1}% |", enc().len(), 100.0 * c / p);
    }
}
