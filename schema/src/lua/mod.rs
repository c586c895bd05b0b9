//! Lua generation: one put script and one delete script per document type,
//! a step script for a type with an outbox, plus a read script for unique
//! lookups, with their KEYS/ARGV layout.
//!
//! Pure functions from a [`DocumentSpec`](crate::DocumentSpec). The layout
//! types ([`PutLayout`], [`DeleteLayout`]) are the single description of
//! argument positions: the generated text and the runtime's argument
//! assembly both read them. Scripts never build keys (except the read-only
//! unique lookup, see [`find_script`]), never build or parse JSON, and
//! report outcomes as `{code, ...}` arrays (see [`ret`]).
//!
//! - [`layout`]: the KEYS/ARGV contract.
//! - `put`, `delete`, `find`: one script each; `step`: the put with work
//!   entries and an event marker, for a type with an outbox.
//! - `common`: what the put and delete scripts share (the hash read, the
//!   corruption and scope checks, the check of the caller's read).
//! - `text`: Lua text helpers.

mod common;
mod delete;
mod find;
pub mod layout;
mod put;
mod step;
mod text;

pub use delete::delete_script;
pub use find::find_script;
pub use layout::{
    CommonSlots, DeleteLayout, EntrySlots, IndexField, IndexSlots, OutboxSlots, PutIndexSlots, PutLayout, StepLayout,
    all_index_fields, index_fields,
};
pub use put::put_script;
pub use step::step_script;
pub use text::lua_escape_class;

/// Return codes: the first element of every script reply.
pub mod ret {
    /// `{0, current}`: the expected version does not match.
    pub const CONFLICT: i64 = 0;
    /// `{1, version}`: written (put) or deleted (delete; `version` was the last one).
    pub const WRITTEN: i64 = 1;
    /// `{2}`: no such document.
    pub const NOT_FOUND: i64 = 2;
    /// `{3, stored_scope}`: the id belongs to another scope; nothing written.
    pub const WRONG_SCOPE: i64 = 3;
    /// `{4, index_position, holder_id}`: a unique key is held by another id; nothing written.
    pub const UNIQUE_VIOLATION: i64 = 4;
    /// `{5}`: stored index fields differ from what the caller read; read again.
    pub const RETRY: i64 = 5;
    /// `{6, field}`: the hash is corrupt (`v` not a version, `doc` or `scope`
    /// missing); `{6, 'v', 'limit'}`: the version is [`super::MAX_VERSION`],
    /// so the document cannot be written again. Nothing written.
    pub const CORRUPT: i64 = 6;
    /// `{7, version}`: this operation id was already applied and produced `version`.
    pub const ALREADY_APPLIED: i64 = 7;
    /// `{8, job}`: (step) the step's event was applied already, by the step
    /// of document `job`; nothing written.
    pub const EVENT_APPLIED: i64 = 8;
    /// `{9, stored_schema}`: the document was last written by a newer
    /// schema of the type than the script's (its stamp is greater);
    /// nothing written.
    pub const SCHEMA_BEHIND: i64 = 9;
}

/// The largest stored version, 2^53 - 1: Lua numbers are doubles, exact up
/// to here. A version is `1 ..= MAX_VERSION` in decimal without sign or
/// leading zero; the scripts and the store's reader accept nothing else, and
/// a write that would pass it is refused (never rounded, never wrapped).
pub const MAX_VERSION: u64 = (1 << 53) - 1;

/// The length of a stored operation id: every id the scripts see is exactly
/// this long (a generated id, or the digest of a caller's id, see
/// [`stored_op_id`]), so the `ops` history needs no separators.
pub const OP_ID_LEN: usize = 12;

/// The most operation ids a document hash may keep (field `ops`: the ids
/// of the last writes, oldest first, each [`OP_ID_LEN`] bytes, no
/// separator). The count itself is a write option passed to the put script;
/// the entries are the ids of consecutive versions ending at `v`, so an
/// entry's position gives the version it produced and no version is stored.
/// 64 ids are 768 bytes: beyond that the history would outweigh a typical
/// document.
pub const MAX_OP_HISTORY_ENTRIES: usize = 64;

/// The longest lifetime a script is given, in milliseconds (100 years):
/// the server refuses an expiry it cannot add to its clock, and a refused
/// `SET ... PX` would fail a script after its first write.
/// The same bound as every duration setting.
pub const MAX_LIFETIME_MS: u64 = crate::duration::MAX_DURATION.as_millis() as u64;

/// The most work entries one step appends.
pub const MAX_WORK_ENTRIES: usize = 1000;

/// The most fields of one work entry (one `XADD` spreads them on the Lua
/// stack).
pub const MAX_ENTRY_FIELDS: usize = 1000;

/// The most family effects (counter increments, hash increments, set and
/// sorted-set adds and removes) one step may carry.
pub const MAX_STEP_EFFECTS: usize = 64;

/// The longest integer text a step's counter effects read or add: 16
/// characters (`-999999999999999` to `9999999999999999`), so no sum of two
/// overflows the server's 64-bit integers halfway through a script.
pub const MAX_EFFECT_INTEGER_LEN: usize = 16;

/// The longest operation id accepted.
pub const MAX_OP_ID_LEN: usize = 64;

/// Whether `op` is a valid operation id: 1 to 64 of `[A-Za-z0-9_.:-]`
/// (no space or `=`, which delimit the `ops` history).
pub fn valid_op_id(op: &str) -> bool {
    !op.is_empty()
        && op.len() <= MAX_OP_ID_LEN
        && op.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// The alphabet of stored operation ids (6 bits a character).
pub const OP_ID_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The stored form of a caller's operation id: a 72-bit digest in
/// [`OP_ID_LEN`] characters of [`OP_ID_ALPHABET`]. The same id always gives
/// the same digest (in every process and release), so a retry in a later
/// call is recognised; two different ids share a digest with odds of about
/// 2^-72 per pair, and only matter when both write the same document
/// within its history.
pub fn stored_op_id(op: &str) -> String {
    // Two FNV-1a passes with different offsets: stable across builds,
    // unlike the standard library's hasher.
    let fnv = |basis: u64| op.bytes().fold(basis, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    let (a, b) = (fnv(0xcbf2_9ce4_8422_2325), fnv(0x6c62_272e_07bb_0142));
    op_id_from_bits(a, b)
}

/// The expectation argument of the put and delete scripts for a
/// revision: `<version>`, or `<version>:<stored op id>` when the revision
/// names the write that produced it. The scripts compare the version, and
/// the op id with the last entry of the stored history; this is the one
/// place the text is made.
pub fn revision_arg(version: u64, op: Option<&str>) -> String {
    match op {
        Some(op) => format!("{version}:{op}"),
        None => version.to_string(),
    }
}

/// [`OP_ID_LEN`] characters from 72 bits: 36 from each half.
pub fn op_id_from_bits(a: u64, b: u64) -> String {
    let bits = (u128::from(a >> 28) << 36) | u128::from(b >> 28);
    (0..OP_ID_LEN).map(|i| char::from(OP_ID_ALPHABET[((bits >> (6 * i)) & 63) as usize])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_args_are_pinned() {
        assert_eq!(revision_arg(7, Some("yNNnc5IT1P2r")), "7:yNNnc5IT1P2r");
        assert_eq!(revision_arg(12, None), "12");
    }

    #[test]
    fn stored_op_ids() {
        let a = stored_op_id("job-42.step-3");
        assert_eq!(a.len(), OP_ID_LEN);
        assert!(valid_op_id(&a), "{a}");
        assert_eq!(a, stored_op_id("job-42.step-3"), "deterministic");
        assert_ne!(a, stored_op_id("job-42.step-4"));
        // Pinned by literals (computed independently from the FNV-1a
        // definition): a stored id must not change between releases, or a
        // retry across an upgrade is not recognised.
        assert_eq!(stored_op_id("x"), "yNNnc5IT1P2r");
        assert_eq!(stored_op_id("order-7/attempt-1"), "19vC08h5qtSJ");
    }

    /// The codes a script's header documents (`--   {N, ...}` lines).
    fn documented_codes(text: &str) -> std::collections::BTreeSet<i64> {
        text.lines()
            .take_while(|l| l.starts_with("--"))
            .filter_map(|l| l.strip_prefix("--   {"))
            .filter_map(|l| l.split([',', '}']).next()?.parse().ok())
            .collect()
    }

    /// The codes a script returns (`return {N` in its text).
    fn returned_codes(text: &str) -> std::collections::BTreeSet<i64> {
        text.lines()
            .filter(|l| !l.starts_with("--"))
            .flat_map(|l| l.match_indices("return {").map(move |(at, _)| &l[at + 8..]))
            .filter_map(|rest| rest.split([',', '}']).next()?.trim().parse().ok())
            .collect()
    }

    #[test]
    fn every_documented_return_is_produced_from_the_runtime_constants() {
        use crate::fixtures::JOB_RESPONSE;
        let all: std::collections::BTreeSet<i64> = [
            ret::CONFLICT,
            ret::WRITTEN,
            ret::NOT_FOUND,
            ret::WRONG_SCOPE,
            ret::UNIQUE_VIOLATION,
            ret::RETRY,
            ret::CORRUPT,
            ret::ALREADY_APPLIED,
            ret::SCHEMA_BEHIND,
        ]
        .into();
        let (put, _) = put_script(&JOB_RESPONSE);
        assert_eq!(documented_codes(&put), all, "put header");
        assert_eq!(returned_codes(&put), all, "put returns");
        let (delete, _) = delete_script(&JOB_RESPONSE);
        assert_eq!(documented_codes(&delete), returned_codes(&delete), "delete: documented = produced");
        let expect: std::collections::BTreeSet<i64> =
            all.iter().copied().filter(|c| *c != ret::UNIQUE_VIOLATION).collect();
        assert_eq!(returned_codes(&delete), expect, "delete returns");
        // The literal values are part of the contract with stored scripts.
        assert_eq!(
            [ret::CONFLICT, ret::WRITTEN, ret::NOT_FOUND, ret::WRONG_SCOPE, ret::UNIQUE_VIOLATION],
            [0, 1, 2, 3, 4]
        );
        assert_eq!([ret::RETRY, ret::CORRUPT, ret::ALREADY_APPLIED, ret::EVENT_APPLIED], [5, 6, 7, 8]);
        assert_eq!(ret::SCHEMA_BEHIND, 9);
    }

    #[test]
    fn op_ids() {
        assert!(valid_op_id("0f3a-77:retry.1_x"));
        assert!(!valid_op_id(""));
        assert!(!valid_op_id("a b"));
        assert!(!valid_op_id("a=b"));
        assert!(!valid_op_id(&"x".repeat(65)));
    }
}

/// The document type the unit tests of this module generate scripts for.
#[cfg(test)]
mod tests_spec {
    pub(super) use crate::fixtures::JOB_RESPONSE as SPEC;
}
