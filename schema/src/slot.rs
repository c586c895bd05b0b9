//! Valkey Cluster key slots: which of the 16384 slots a key lives in.
//!
//! A cluster hashes only a key's *hash tag* when it has one: the text
//! between its first `{` and the next `}`, if that text is non-empty.
//! Every other key is hashed whole. The hash is CRC16 (XMODEM: polynomial
//! 0x1021, initial value 0) modulo 16384. Keys in one slot live on one
//! primary, so only they may meet in one script, transaction or pipeline.
//!
//! ```
//! use microdcs_schema::slot::{key_slot, hash_tag};
//!
//! assert_eq!(hash_tag(b"{island-7}:ticket:s1:t1"), Some(&b"island-7"[..]));
//! assert_eq!(key_slot(b"{island-7}:ticket:s1:t1"), key_slot(b"island-7"));
//! assert_eq!(hash_tag(b"{}x"), None);
//! ```

/// The number of slots of a Valkey Cluster.
pub const SLOTS: u16 = 16384;

/// CRC16 with the XMODEM parameters, the one the cluster uses.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The hash tag of `key`: the bytes between its first `{` and the next
/// `}`, when there are any. An empty tag (`{}`) is no tag: the key is then
/// hashed whole.
pub fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &rest[..close])
}

/// The slot of `key`: CRC16 of its hash tag, or of the whole key when it
/// has none, modulo [`SLOTS`].
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_cluster_specification() {
        // The check value the cluster specification gives for its CRC16.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_pinned_by_value() {
        // Values the server answers to `CLUSTER KEYSLOT` (Valkey 9.1).
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{s1}:x"), 15224);
        assert_eq!(key_slot(b"a{s1}b{c}"), 15224);
        assert_eq!(key_slot(b"{island-7}:scopes"), 9481);
    }

    #[test]
    fn tag_rules() {
        assert_eq!(hash_tag(b"plain"), None);
        assert_eq!(hash_tag(b"{}s1"), None);
        assert_eq!(key_slot(b"{}s1"), crc16(b"{}s1") % SLOTS);
        assert_eq!(hash_tag(b"a{b"), None);
        assert_eq!(hash_tag(b"a{b}c{d}"), Some(&b"b"[..]));
        assert_eq!(hash_tag(b"}{x}"), Some(&b"x"[..]));
        assert_eq!(hash_tag(b"{{x}}"), Some(&b"{x"[..]));
    }
}
