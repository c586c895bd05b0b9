//! Operation ids: the id every write carries so a retry after a lost reply
//! is recognised. Their stored form (a fixed-length digest of a caller's id)
//! is the schema crate's, shared with the generated scripts; this module
//! makes new ones. A leaf: leases, dedupe and the store all use it.

use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use microdcs_schema::lua;

/// A new operation id: 12 characters (72 bits) from a per-process seed, the
/// time and a counter, mixed. It only has to differ from the ids of the other
/// writes to the same document that its history still holds.
pub fn new_op_id() -> String {
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(seed ^ n);
    h.write_u64(t);
    lua::op_id_from_bits(seed ^ t.rotate_left(17) ^ n.rotate_left(40), h.finish() ^ n)
}
