//! Least-privilege ACL rules, generated from the key prefix: what each role
//! may send and touch. The command lists live here and nowhere else; a test
//! runs every flow of a role as a user made from these rules and checks
//! that the commands sent are exactly these (the fallbacks aside).

use std::fmt;

use crate::KeyPrefix;

/// Who connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AclRole {
    /// The application: stores, typed families, streams, the poller,
    /// dedupe, the start lease and the fencing leases.
    App,
    /// Developer tools: the inspector's reads (`inspect::Inspector`, feature `inspect`), read-only keys.
    Inspector,
    /// `verify` and `rebuild` of the indexes and the layout fingerprints.
    Maintenance,
}

/// Commands every role sends to connect (`CLIENT SETINFO` from the client
/// library), to check the server, and to learn a cluster's topology
/// (`CLUSTER SLOTS`: at connect, and whenever a slot has moved), and
/// `ASKING`, which a cluster client sends to follow a slot in migration,
/// and `ROLE`, which a handle through Sentinel asks the node it was named
/// before it sends it anything.
const CONNECT: &[&str] = &["asking", "client|setinfo", "cluster|slots", "ping", "role"];

/// The application's commands, including those its scripts call (the
/// server checks a script's commands against the ACL too).
const APP: &[&str] = &[
    // Scripts: the generated writes, find, paging, dedupe, leases, typed families.
    "evalsha",
    "script|load",
    // Reads and writes of documents and their indexes (also inside scripts).
    "del",
    "exists",
    "get",
    "hdel",
    "hget",
    "hgetall",
    "hincrby",
    "hlen",
    "hmget",
    "hscan",
    "hset",
    "incr",
    "incrby",
    "llen",
    "lpush",
    "lrange",
    "ltrim",
    "pexpire",
    "pttl",
    "publish",
    "sadd",
    "scan",
    "scard",
    "set",
    "sismember",
    "smembers",
    "smismember",
    "smove",
    "spublish",
    "srandmember",
    "srem",
    "sscan",
    "time",
    "type",
    "zadd",
    "zcard",
    "zcount",
    "zrange",
    "zrank",
    "zrem",
    "zremrangebyrank",
    "zremrangebyscore",
    "zrevrank",
    "zscore",
    // Streams and the poller (its pub/sub connection speaks RESP3: `HELLO`).
    "hello",
    "ssubscribe",
    "subscribe",
    "xack",
    "xadd",
    "xautoclaim",
    "xgroup|create",
    "xinfo|groups",
    "xinfo|stream",
    "xlen",
    "xpending",
    "xrange",
    "xreadgroup",
    "xtrim",
];

/// The maintenance role's commands sent only on some paths: `AUTH` when
/// the user has a password, `SELECT` for a database other than 0, `EVAL`
/// when the server refuses or loses a script right after `SCRIPT LOAD`;
/// and what the admin tool's migration steps send besides `verify` and
/// `rebuild`: `TIME` and `ZRANGE` (the registry of live writers, which
/// `migrate status` reads, with the migration lease's time left, `PTTL`;
/// a rebuild of a kind with index states reads it too, to record its
/// building indexes ready only when no writer is live)
/// and `UNLINK`
/// (`migrate drop`: a dropped index's keys, without blocking the server on
/// a large one).
const MAINTENANCE_FALLBACK: &[&str] = &["auth", "eval", "pttl", "select", "time", "unlink", "zrange"];

/// The application's: `AUTH`, `EVAL` and `SELECT` as above, `WAIT` or `WAITAOF` after a write that asks
/// for replicas or the append-only file, `CLUSTER SHARDS` on a cluster
/// for a write that waits for every replica (how many the shard has), and
/// `XGROUP SETID` when a consumer group is moved past a gap of trimmed
/// entries it was told of.
const APP_FALLBACK: &[&str] = &["auth", "cluster|shards", "eval", "select", "wait", "waitaof", "xgroup|setid"];

/// The inspector runs no script, so its fallbacks are the connection's only.
const INSPECTOR_FALLBACK: &[&str] = &["auth", "select"];

/// The inspector's reads.
const INSPECTOR: &[&str] =
    &["get", "hgetall", "pttl", "sismember", "sscan", "time", "xinfo|groups", "xlen", "xpending", "zrange", "zscore"];

/// Verify and rebuild (with the compare-and-delete script of a repair).
const MAINTENANCE: &[&str] = &[
    "evalsha",
    "script|load",
    "del",
    "get",
    "hdel",
    "hgetall",
    "hmget",
    "hset",
    // The first deploy's layout baseline (`needs_rebuild` on an empty kind).
    "hsetnx",
    "mget",
    "sadd",
    "scan",
    "scard",
    "smismember",
    "srem",
    "sscan",
    "set",
    "type",
    "zadd",
    "zcard",
    "zmscore",
    "zrem",
    "zscan",
];

impl AclRole {
    /// Every role, in a fixed order.
    pub const ALL: [AclRole; 3] = [AclRole::App, AclRole::Inspector, AclRole::Maintenance];

    /// The role's name: `app`, `inspector`, `maintenance`.
    pub const fn name(self) -> &'static str {
        match self {
            AclRole::App => "app",
            AclRole::Inspector => "inspector",
            AclRole::Maintenance => "maintenance",
        }
    }

    /// The role by name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The commands the role sends in normal operation, lower case,
    /// subcommands as `container|sub` (the ACL and `INFO commandstats` form).
    pub fn commands(self) -> Vec<&'static str> {
        let own = match self {
            AclRole::App => APP,
            AclRole::Inspector => INSPECTOR,
            AclRole::Maintenance => MAINTENANCE,
        };
        let mut v: Vec<&str> = CONNECT.iter().chain(own).copied().collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Commands the role may send only on a fallback path (granted too).
    pub fn fallback_commands(self) -> &'static [&'static str] {
        match self {
            AclRole::App => APP_FALLBACK,
            AclRole::Inspector => INSPECTOR_FALLBACK,
            AclRole::Maintenance => MAINTENANCE_FALLBACK,
        }
    }

    /// The role's rules for `prefix`, in `ACL SETUSER` order: no command but
    /// the role's, keys under the prefix only (read-only for the
    /// inspector), the prefix's channels for the application. No password:
    /// add one (`>secret` or `#sha256`) yourself; a new user without one
    /// cannot log in.
    pub fn rules(self, prefix: &KeyPrefix) -> Vec<String> {
        let mut rules: Vec<String> = vec!["on".into(), "resetkeys".into(), "resetchannels".into(), "-@all".into()];
        rules.extend(
            self.commands().into_iter().chain(self.fallback_commands().iter().copied()).map(|c| format!("+{c}")),
        );
        let pattern = prefix.pattern();
        match self {
            AclRole::Inspector => rules.push(format!("%R~{pattern}")),
            _ => rules.push(format!("~{pattern}")),
        }
        if self == AclRole::App {
            rules.push(format!("&{pattern}"));
        }
        rules
    }

    /// `ACL SETUSER <user> <rules...>` as one line whose words survive a
    /// POSIX shell and `valkey-cli`'s own prompt alike: append it to
    /// `valkey-cli -u <url>` in a shell, or paste it at the prompt. Each
    /// word that holds a character either would read (`|` in
    /// `+client|setinfo`, `*`, `~`, `&`, spaces, quotes) is quoted.
    pub fn setuser(self, prefix: &KeyPrefix, user: &str) -> String {
        let words = ["ACL".to_owned(), "SETUSER".to_owned(), user.to_owned()].into_iter().chain(self.rules(prefix));
        words.map(|w| quote(&w)).collect::<Vec<_>>().join(" ")
    }
}

/// `word` as one word for a POSIX shell and for `valkey-cli` (whose prompt
/// splits lines as `sdssplitargs` does): bare when it holds only characters
/// neither treats specially; else in single quotes, inside which neither
/// reads anything; else, when it holds a `'` or a `\` (which `valkey-cli`
/// would read as an escape inside single quotes), in double quotes with
/// `\`, `"`, `$` and `` ` `` escaped, which both read back as the bare
/// character.
fn quote(word: &str) -> String {
    let bare = |c: char| c.is_ascii_alphanumeric() || "-_.+@:/,=%".contains(c);
    if !word.is_empty() && word.chars().all(bare) {
        word.to_owned()
    } else if !word.contains(['\'', '\\']) {
        format!("'{word}'")
    } else {
        let mut out = String::from('"');
        for c in word.chars() {
            if matches!(c, '\\' | '"' | '$' | '`') {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
        out
    }
}

impl fmt::Display for AclRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prefix's escaping, as `KeyPrefix::pattern` applies it.
    fn glob_escape(text: &str) -> String {
        let mut out = String::new();
        crate::encode::glob_escape_into(&mut out, text);
        out
    }

    #[test]
    fn rules_confine_each_role() {
        let p = KeyPrefix::new("island-7").unwrap();
        let app = AclRole::App.setuser(&p, "plant");
        assert!(
            app.starts_with(
                "ACL SETUSER plant on resetkeys resetchannels -@all +asking '+client|setinfo' '+cluster|slots'"
            ),
            "{app}"
        );
        assert!(app.ends_with("'~island-7:*' '&island-7:*'"), "{app}");
        assert!(!app.contains('>') && !app.contains("nopass"), "no password, never nopass");
        let insp = AclRole::Inspector.rules(&p);
        assert!(insp.contains(&"%R~island-7:*".to_owned()));
        assert!(!insp.iter().any(|r| r.starts_with('&')), "no channels");
        for write in ["+set", "+hset", "+del", "+evalsha", "+eval", "+xadd", "+publish"] {
            assert!(!insp.contains(&write.to_owned()), "inspector has {write}");
        }
        assert_eq!(glob_escape("a*b?c[d]e\\"), "a\\*b\\?c\\[d\\]e\\\\");
        assert_eq!(AclRole::Maintenance.setuser(&p, "a b").split_whitespace().nth(2), Some("'a"));
        assert_eq!(quote("it's $x"), "\"it's \\$x\"");
        assert_eq!(AclRole::from_name("inspector"), Some(AclRole::Inspector));
    }
}
