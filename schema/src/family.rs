//! What a key family is: its Valkey type, its declared kind and its spec.
//! A leaf of the schema crate, so the built-in families and the specs that
//! use them both build on it without importing each other.

/// The Valkey type stored at a key family (or `Channel` for pub/sub).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// A string.
    String,
    /// A hash.
    Hash,
    /// A set.
    Set,
    /// A sorted set.
    SortedSet,
    /// A stream.
    Stream,
    /// A list.
    List,
    /// A pub/sub channel (not a key: checked only against other channels).
    Channel,
}

impl KeyType {
    /// The name Valkey's `TYPE` command reports (`channel` for channels).
    pub const fn type_name(self) -> &'static str {
        match self {
            KeyType::String => "string",
            KeyType::Hash => "hash",
            KeyType::Set => "set",
            KeyType::SortedSet => "zset",
            KeyType::Stream => "stream",
            KeyType::List => "list",
            KeyType::Channel => "channel",
        }
    }
}

/// A non-document key family declared in a keyspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilySpec<'a> {
    /// Family name (`dedupe`), used for generated method names.
    pub name: &'a str,
    /// Key template (`ce:dedupe:{hash}`).
    pub key: &'a str,
    /// Type stored at the key.
    pub key_type: KeyType,
    /// What the declaration said it is (`rate_limit`, `counter`, ...), or
    /// [`FamilyKind::Builtin`] for the runtime's own families.
    pub kind: FamilyKind,
    /// The lifetime every write gives a key (`ttl = "60s"`), in milliseconds.
    pub ttl_ms: Option<u64>,
}

impl<'a> FamilySpec<'a> {
    /// A family of the plain kind for its key type, without a lifetime.
    pub const fn new(name: &'a str, key: &'a str, key_type: KeyType) -> Self {
        FamilySpec { name, key, key_type, kind: FamilyKind::plain(key_type), ttl_ms: None }
    }
}

/// The kind a `keyspace!` declaration gives a family: what its handle is
/// and how its keys are used (several kinds share a key type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FamilyKind {
    /// `string(...)`: text values.
    String,
    /// `value<T>(...)`: typed values.
    Value,
    /// `counter(...)`: an integer count.
    Counter,
    /// `content(...)`: texts by their digest.
    Content,
    /// `hash(...)` or `hash<K, V>(...)`.
    Hash,
    /// `rate_limit(...)`: a hash of window, count, failures and block.
    RateLimit,
    /// `set(...)`.
    Set,
    /// `zset(...)`.
    SortedSet,
    /// `list(...)`.
    List,
    /// `stream(...)`.
    Stream,
    /// `channel(...)` or `channel<T>(...)`.
    Channel,
    /// A family of the runtime itself (change streams, leases, ...).
    Builtin,
}

impl FamilyKind {
    /// The plain kind of a key type.
    pub const fn plain(key_type: KeyType) -> Self {
        match key_type {
            KeyType::String => FamilyKind::String,
            KeyType::Hash => FamilyKind::Hash,
            KeyType::Set => FamilyKind::Set,
            KeyType::SortedSet => FamilyKind::SortedSet,
            KeyType::Stream => FamilyKind::Stream,
            KeyType::List => FamilyKind::List,
            KeyType::Channel => FamilyKind::Channel,
        }
    }

    /// Every declaration word, in the order the docs list them.
    pub const WORDS: [&'static str; 11] =
        ["string", "value", "counter", "content", "hash", "set", "zset", "list", "stream", "channel", "rate_limit"];

    /// The kind a declaration word names (`rate_limit`), if any.
    pub fn from_word(word: &str) -> Option<Self> {
        Some(match word {
            "string" => FamilyKind::String,
            "value" => FamilyKind::Value,
            "counter" => FamilyKind::Counter,
            "content" => FamilyKind::Content,
            "hash" => FamilyKind::Hash,
            "rate_limit" => FamilyKind::RateLimit,
            "set" => FamilyKind::Set,
            "zset" => FamilyKind::SortedSet,
            "list" => FamilyKind::List,
            "stream" => FamilyKind::Stream,
            "channel" => FamilyKind::Channel,
            _ => return None,
        })
    }

    /// The Valkey type its keys hold; `None` for [`FamilyKind::Builtin`],
    /// whose families each have their own (see [`FamilySpec::key_type`]).
    pub const fn key_type(self) -> Option<KeyType> {
        Some(match self {
            FamilyKind::String | FamilyKind::Value | FamilyKind::Counter | FamilyKind::Content => KeyType::String,
            FamilyKind::Hash | FamilyKind::RateLimit => KeyType::Hash,
            FamilyKind::Set => KeyType::Set,
            FamilyKind::SortedSet => KeyType::SortedSet,
            FamilyKind::List => KeyType::List,
            FamilyKind::Stream => KeyType::Stream,
            FamilyKind::Channel => KeyType::Channel,
            FamilyKind::Builtin => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::FamilyKind;

    #[test]
    fn every_declaration_word_names_a_kind_with_a_key_type() {
        for w in FamilyKind::WORDS {
            let kind = FamilyKind::from_word(w).unwrap_or_else(|| panic!("{w}"));
            assert!(kind.key_type().is_some(), "{w}");
        }
        assert_eq!(FamilyKind::from_word("rate_limit"), Some(FamilyKind::RateLimit));
        assert_eq!(FamilyKind::from_word("map"), None);
        assert_eq!(FamilyKind::Builtin.key_type(), None);
    }
}
