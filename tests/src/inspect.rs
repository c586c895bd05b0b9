//! Reading the keyspace back for assertions.

use std::collections::BTreeMap;

use microdcs_valkey::KeyPrefix;
use microdcs_valkey::redis::{self, aio::ConnectionLike};

/// Every key under `prefix` with its type and content rendered as text
/// (hash fields, set members and zset entries sorted; stream entries without ids),
/// leaving out the registry of live writers and the index states
/// (`schema:writers:*`, `schema:indexes:*`).
///
/// # Panics
/// On a command error (this is a test helper).
pub async fn snapshot<C: ConnectionLike + Send>(con: &mut C, prefix: &KeyPrefix) -> BTreeMap<String, String> {
    let pattern = format!("{}:*", prefix.as_str());
    let mut keys: Vec<String> = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(con)
            .await
            .unwrap();
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    keys.sort();
    keys.dedup();
    // The registry of live writers and the index states are written by the
    // announcement a store makes before its first write and whenever its
    // heartbeat is due: bookkeeping of which releases run, not data the
    // operation under test (or a refused one) changes. The evolution tests
    // read them directly.
    let writers = format!("{}:schema:writers:", prefix.as_str());
    let states = format!("{}:schema:indexes:", prefix.as_str());
    keys.retain(|k| !k.starts_with(&writers) && !k.starts_with(&states));
    let mut out = BTreeMap::new();
    for k in keys {
        let ty: String = redis::cmd("TYPE").arg(&k).query_async(con).await.unwrap();
        let content = match ty.as_str() {
            "string" => {
                let v: Vec<u8> = redis::cmd("GET").arg(&k).query_async(con).await.unwrap();
                String::from_utf8_lossy(&v).into_owned()
            }
            "hash" => {
                let v: BTreeMap<String, Vec<u8>> = redis::cmd("HGETALL").arg(&k).query_async(con).await.unwrap();
                format!(
                    "{:?}",
                    v.into_iter().map(|(f, x)| (f, String::from_utf8_lossy(&x).into_owned())).collect::<Vec<_>>()
                )
            }
            "set" => {
                let mut v: Vec<String> = redis::cmd("SMEMBERS").arg(&k).query_async(con).await.unwrap();
                v.sort();
                format!("{v:?}")
            }
            "zset" => {
                let v: Vec<(String, f64)> =
                    redis::cmd("ZRANGE").arg(&k).arg(0).arg(-1).arg("WITHSCORES").query_async(con).await.unwrap();
                format!("{v:?}")
            }
            "stream" => format!("{:?}", stream_entries(con, &k).await),
            other => format!("<{other}>"),
        };
        out.insert(k, format!("{ty}: {content}"));
    }
    out
}

/// The field maps of every entry of a stream, oldest first.
///
/// # Panics
/// On a command error.
pub async fn stream_entries<C: ConnectionLike + Send>(con: &mut C, key: &str) -> Vec<BTreeMap<String, String>> {
    let v: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(key).arg("-").arg("+").query_async(con).await.unwrap();
    v.into_iter().map(|(_, fields)| fields.into_iter().collect()).collect()
}

/// `INFO commandstats` as command -> calls.
///
/// # Panics
/// On a command error.
pub async fn command_calls<C: ConnectionLike + Send>(con: &mut C) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(con).await.unwrap();
    info.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats.split(',').find_map(|s| s.strip_prefix("calls="))?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// `INFO commandstats` as command -> (calls, total microseconds).
///
/// # Panics
/// On a command error.
pub async fn command_usec<C: ConnectionLike + Send>(con: &mut C) -> BTreeMap<String, (u64, u64)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(con).await.unwrap();
    info.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let field = |f: &str| stats.split(',').find_map(|s| s.strip_prefix(f))?.parse().ok();
            Some((name.to_owned(), (field("calls=")?, field("usec=")?)))
        })
        .collect()
}

/// The server's `used_memory` (`INFO memory`), in bytes: what the memory
/// benches compare before and after writing.
///
/// # Panics
/// When the reply has no such line.
pub async fn used_memory<C: ConnectionLike + Send>(con: &mut C) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query_async(con).await.unwrap();
    info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap()
}
