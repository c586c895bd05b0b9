// Over 600 lines: the lock's model, its text form (render and parse, a
// persisted format) and the diff with its fixes. The seam if it grows: the
// parser into lock/parse.rs; the tests are already in lock/tests.rs.
//! The schema lock: a committed text describing every kind of a keyspace as
//! its stored data depends on it, compared with the code without a server
//! (as `sqlx prepare --check` compares its query data).
//!
//! A lock records, per document kind: the document key template, the
//! struct's fields in declaration order (the positions `CompactJson` stores
//! values at), the lifetime, the change stream, nudge channel, registry and
//! outbox templates, and each index's layout text (the text its fingerprint
//! is computed over, [`DocumentSpec::index_layouts`]); per declared family:
//! its word, key type, template and lifetime.
//!
//! [`LockDiff::between`] compares a committed lock with the code's and sorts
//! every change into a [`ChangeClass`]:
//! - [`ChangeClass::Safe`]: stored data reads as before (a new type, an
//!   appended field, a new family, another lifetime);
//! - [`ChangeClass::Rebuild`]: an index's stored entries follow another
//!   layout, or a new index is empty for the documents stored before it
//!   (the fix: rebuild it after the deploy, with no older writer left);
//! - [`ChangeClass::Breaking`]: stored data would be read wrong or not
//!   found (a reordered, inserted or removed field, a changed document key
//!   or family template, a removed type): the fix is named, and accepting
//!   it takes an explicit force.
//!
//! The lock holds no prefix and no server address: it is the shape of the
//! keyspace, the same in every deployment.
//!
//! ```
//! use microdcs_schema::lock::{ChangeClass, Lock, LockDiff};
//! use microdcs_schema::{DocumentSpec, KeyspaceSpec};
//!
//! const OLD: [DocumentSpec<'static>; 1] =
//!     [DocumentSpec { fields: &["id", "scope", "title", "body"], ..DocumentSpec::new("Note", "note", "note:{id}") }];
//! const NEW: [DocumentSpec<'static>; 1] =
//!     [DocumentSpec { fields: &["id", "scope", "body", "title"], ..DocumentSpec::new("Note", "note", "note:{id}") }];
//! let ks = |documents| KeyspaceSpec { name: "Notes", documents, families: &[], shard: None };
//! let committed = Lock::of(&ks(&OLD)).render();
//! let diff = LockDiff::between(&Lock::parse(&committed).unwrap(), &Lock::of(&ks(&NEW)));
//! assert_eq!(diff.worst(), Some(ChangeClass::Breaking));
//! assert!(diff.report().contains("append new fields last with `#[serde(default)]`, never reorder"));
//! ```

use std::fmt::Write as _;

use crate::family::{FamilyKind, FamilySpec};
use crate::spec::{DocumentSpec, KeyspaceSpec};

/// The first line of every lock: the version of this text format. A lock
/// of another version is refused, never read by guesswork.
pub const LOCK_FORMAT: &str = "microdcs-lock-v1";

/// One document kind as the lock records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedKind {
    /// The kind (`joborder`): what the lock matches kinds by.
    pub kind: String,
    /// The Rust type name (for messages only).
    pub type_name: String,
    /// The schema version that writes it (`#[microdcs(schema = N)]`), once
    /// the spec carries one; `None` in a lock written before.
    pub schema: Option<u32>,
    /// Document key template.
    pub key: String,
    /// Field names in declaration order: position `i` is the `i`-th value
    /// of a `CompactJson` text.
    pub fields: Vec<String>,
    /// Default lifetime in milliseconds.
    pub ttl_ms: Option<u64>,
    /// Change stream template (`None`: `changes = none`).
    pub changes: Option<String>,
    /// Nudge channel template.
    pub nudge: String,
    /// Scope registry template.
    pub registry: String,
    /// Outbox stream template and event marker template.
    pub outbox: Option<(String, Option<String>)>,
    /// `(index, layout text)` per index, the list as `list`.
    pub indexes: Vec<(String, String)>,
}

/// One declared family of the keyspace as the lock records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedFamily {
    /// Family name.
    pub name: String,
    /// Declaration word (`hash`, `value`, `counter`, ...).
    pub word: String,
    /// Key template.
    pub key: String,
    /// Lifetime of every key in milliseconds.
    pub ttl_ms: Option<u64>,
}

/// A keyspace's lock: its kinds and declared families.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// Keyspace name.
    pub keyspace: String,
    /// Document kinds, in the keyspace's order.
    pub kinds: Vec<LockedKind>,
    /// Declared families, in the keyspace's order.
    pub families: Vec<LockedFamily>,
}

/// A lock text that is not one this version writes: which line and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema lock{}: {why}", if *.line == 0 { String::new() } else { format!(" line {}", .line) })]
pub struct LockParseError {
    /// 1-based line number; 0 for the text as a whole.
    pub line: usize,
    /// What is wrong there.
    pub why: String,
}

/// The declaration word of a family kind (the inverse of
/// [`FamilyKind::from_word`]; `builtin` for the runtime's own).
fn word(kind: FamilyKind) -> &'static str {
    match kind {
        FamilyKind::String => "string",
        FamilyKind::Value => "value",
        FamilyKind::Counter => "counter",
        FamilyKind::Content => "content",
        FamilyKind::Hash => "hash",
        FamilyKind::RateLimit => "rate_limit",
        FamilyKind::Set => "set",
        FamilyKind::SortedSet => "zset",
        FamilyKind::List => "list",
        FamilyKind::Stream => "stream",
        FamilyKind::Channel => "channel",
        FamilyKind::Builtin => "builtin",
    }
}

fn opt_ms(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".to_owned(), |m| m.to_string())
}

impl LockedKind {
    /// The lock entry of a document type.
    pub fn of(spec: &DocumentSpec<'_>) -> Self {
        LockedKind {
            kind: spec.kind.to_owned(),
            type_name: spec.type_name.to_owned(),
            // The schema version its writes stamp (`#[microdcs(schema = N)]`).
            schema: Some(spec.schema),
            key: spec.key.to_owned(),
            fields: spec.fields.iter().map(|f| (*f).to_owned()).collect(),
            ttl_ms: spec.ttl_ms,
            changes: spec.changes.map(str::to_owned),
            nudge: spec.nudge.to_owned(),
            registry: spec.registry.to_owned(),
            outbox: spec.outbox.map(|o| (o.stream.to_owned(), o.events.map(str::to_owned))),
            indexes: spec.index_layouts().into_iter().map(|l| (l.index.to_owned(), l.text)).collect(),
        }
    }
}

impl LockedFamily {
    /// The lock entry of a declared family.
    pub fn of(f: &FamilySpec<'_>) -> Self {
        LockedFamily { name: f.name.to_owned(), word: word(f.kind).to_owned(), key: f.key.to_owned(), ttl_ms: f.ttl_ms }
    }
}

impl Lock {
    /// The lock of a keyspace as the code describes it. Refused document
    /// types (the derive's stand-ins) have no kind and are left out.
    pub fn of(spec: &KeyspaceSpec<'_>) -> Self {
        Lock {
            keyspace: spec.name.to_owned(),
            kinds: spec.documents.iter().filter(|d| !d.is_refused()).map(LockedKind::of).collect(),
            families: spec.families.iter().map(LockedFamily::of).collect(),
        }
    }

    /// The lock as text: one fact a line, so a change reads as a one-line
    /// diff in review. Templates and layout texts hold no whitespace (the
    /// template grammar refuses it), so a line splits on spaces.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{LOCK_FORMAT}");
        let _ = writeln!(
            out,
            "# The schema lock of keyspace `{}`: what stored data depends on. Checked by a test;",
            self.keyspace
        );
        let _ = writeln!(out, "# after an intended change rewrite it with BLESS=1 (see microdcs_valkey::lock).");
        let _ = writeln!(out, "keyspace {}", self.keyspace);
        for k in &self.kinds {
            let _ = writeln!(out, "kind {}", k.kind);
            let _ = writeln!(out, "  type {}", k.type_name);
            if let Some(s) = k.schema {
                let _ = writeln!(out, "  schema {s}");
            }
            let _ = writeln!(out, "  key {}", k.key);
            for (i, f) in k.fields.iter().enumerate() {
                let _ = writeln!(out, "  field {i} {f}");
            }
            let _ = writeln!(out, "  ttl {}", opt_ms(k.ttl_ms));
            let _ = writeln!(out, "  changes {}", k.changes.as_deref().unwrap_or("-"));
            let _ = writeln!(out, "  nudge {}", k.nudge);
            let _ = writeln!(out, "  registry {}", k.registry);
            match &k.outbox {
                Some((stream, events)) => {
                    let _ = writeln!(out, "  outbox {stream} {}", events.as_deref().unwrap_or("-"));
                }
                None => {
                    let _ = writeln!(out, "  outbox -");
                }
            }
            for (name, text) in &k.indexes {
                let _ = writeln!(out, "  index {name} {text}");
            }
        }
        for f in &self.families {
            let _ = writeln!(out, "family {} {} {} {}", f.name, f.word, f.key, opt_ms(f.ttl_ms));
        }
        out
    }

    /// Reads a lock text.
    ///
    /// # Errors
    /// A text of another format version, an unknown or malformed line, or a
    /// line out of place: nothing is guessed.
    pub fn parse(text: &str) -> Result<Self, LockParseError> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let bad = |line: usize, why: String| LockParseError { line, why };
        match lines.next() {
            Some((_, first)) if first.trim_end() == LOCK_FORMAT => {}
            Some((n, first)) => {
                return Err(bad(n, format!("expected `{LOCK_FORMAT}` (this version's format), found `{first}`")));
            }
            None => return Err(bad(0, format!("empty: expected `{LOCK_FORMAT}`"))),
        }
        let mut keyspace = None;
        let mut kinds: Vec<LockedKind> = Vec::new();
        let mut families = Vec::new();
        for (n, line) in lines {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let indented = line.starts_with("  ");
            let words: Vec<&str> = line.split_whitespace().collect();
            let (head, rest) = words.split_first().map_or(("", &[][..]), |(h, r)| (*h, r));
            let one = |what: &str| -> Result<String, LockParseError> {
                match rest {
                    [v] => Ok((*v).to_owned()),
                    _ => Err(bad(n, format!("`{head}` takes one {what}"))),
                }
            };
            let ms = |v: &str| -> Result<Option<u64>, LockParseError> {
                if v == "-" {
                    return Ok(None);
                }
                v.parse().map(Some).map_err(|_| bad(n, format!("`{v}` is no lifetime in milliseconds (or `-`)")))
            };
            let dash = |v: String| if v == "-" { None } else { Some(v) };
            if !indented {
                match head {
                    "keyspace" if keyspace.is_none() => keyspace = Some(one("name")?),
                    "kind" => {
                        let kind = one("kind")?;
                        if kinds.iter().any(|k| k.kind == kind) {
                            return Err(bad(n, format!("kind `{kind}` twice")));
                        }
                        kinds.push(LockedKind {
                            kind,
                            type_name: String::new(),
                            schema: None,
                            key: String::new(),
                            fields: Vec::new(),
                            ttl_ms: None,
                            changes: None,
                            nudge: String::new(),
                            registry: String::new(),
                            outbox: None,
                            indexes: Vec::new(),
                        });
                    }
                    "family" => match rest {
                        [name, word, key, ttl] => families.push(LockedFamily {
                            name: (*name).to_owned(),
                            word: (*word).to_owned(),
                            key: (*key).to_owned(),
                            ttl_ms: ms(ttl)?,
                        }),
                        _ => return Err(bad(n, "`family` takes a name, a word, a template and a lifetime".into())),
                    },
                    _ => return Err(bad(n, format!("unexpected `{head}`"))),
                }
                continue;
            }
            let Some(k) = kinds.last_mut() else {
                return Err(bad(n, format!("`{head}` before any `kind`")));
            };
            match head {
                "type" => k.type_name = one("type name")?,
                "schema" => {
                    let v = one("version")?;
                    k.schema = Some(v.parse().map_err(|_| bad(n, format!("`{v}` is no schema version")))?);
                }
                "key" => k.key = one("template")?,
                "field" => match rest {
                    [i, name] if i.parse::<usize>().ok() == Some(k.fields.len()) => k.fields.push((*name).to_owned()),
                    _ => {
                        return Err(bad(n, format!("expected `field {} NAME` (positions in order)", k.fields.len())));
                    }
                },
                "ttl" => k.ttl_ms = ms(&one("lifetime")?)?,
                "changes" => k.changes = dash(one("template")?),
                "nudge" => k.nudge = one("template")?,
                "registry" => k.registry = one("template")?,
                "outbox" => {
                    k.outbox = match rest {
                        ["-"] => None,
                        [stream, events] => Some(((*stream).to_owned(), dash((*events).to_owned()))),
                        _ => return Err(bad(n, "`outbox` takes `-` or a stream and an event template".into())),
                    }
                }
                "index" => match rest {
                    [name, text] => k.indexes.push(((*name).to_owned(), (*text).to_owned())),
                    _ => return Err(bad(n, "`index` takes a name and a layout text".into())),
                },
                _ => return Err(bad(n, format!("unexpected `{head}` in kind `{}`", k.kind))),
            }
        }
        if let Some(k) = kinds.iter().find(|k| k.key.is_empty()) {
            return Err(bad(0, format!("kind `{}` has no `key`", k.kind)));
        }
        let keyspace = keyspace.ok_or_else(|| bad(0, "no `keyspace` line".into()))?;
        Ok(Lock { keyspace, kinds, families })
    }
}

/// How a change between the lock and the code bears on stored data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeClass {
    /// Stored data reads as before; re-bless the lock.
    Safe,
    /// An index must be rebuilt after the deploy; re-bless the lock.
    Rebuild,
    /// Stored data would be read wrong or not found: do the named fix, and
    /// re-bless only with force.
    Breaking,
}

impl ChangeClass {
    /// `safe`, `rebuild` or `breaking`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ChangeClass::Safe => "safe",
            ChangeClass::Rebuild => "rebuild",
            ChangeClass::Breaking => "breaking",
        }
    }
}

/// One difference between the lock and the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockChange {
    /// `kind joborder`, `family dedupe`, `keyspace`.
    pub subject: String,
    /// What changed.
    pub what: String,
    /// How it bears on stored data.
    pub class: ChangeClass,
    /// What to do about it.
    pub fix: String,
}

/// Every difference between a lock and the code's lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockDiff {
    /// The differences, kinds first, in the code's order.
    pub changes: Vec<LockChange>,
}

const FORCE: &str = "then re-bless with BLESS=force";

impl LockDiff {
    /// The differences from `locked` (committed) to `code` (the build).
    pub fn between(locked: &Lock, code: &Lock) -> Self {
        let mut d = LockDiff::default();
        if locked.keyspace != code.keyspace {
            d.push(
                "keyspace",
                format!("renamed from `{}` to `{}`", locked.keyspace, code.keyspace),
                ChangeClass::Safe,
                "nothing stored names the keyspace; re-bless",
            );
        }
        for old in &locked.kinds {
            if !code.kinds.iter().any(|k| k.kind == old.kind) {
                d.push(
                    &format!("kind {}", old.kind),
                    format!("`{}` left the keyspace (or its kind was renamed)", old.type_name),
                    ChangeClass::Breaking,
                    &format!(
                        "its stored documents, indexes and change entries stay under `{}` unread: keep the type (or its \
                         `kind = \"{}\"`) until its data is copied or deleted, {FORCE}",
                        old.key, old.kind
                    ),
                );
            }
        }
        for new in &code.kinds {
            match locked.kinds.iter().find(|k| k.kind == new.kind) {
                None => d.push(
                    &format!("kind {}", new.kind),
                    format!("new type `{}`", new.type_name),
                    ChangeClass::Safe,
                    "nothing is stored for it yet; re-bless",
                ),
                Some(old) => d.kind(old, new),
            }
        }
        for old in &locked.families {
            if !code.families.iter().any(|f| f.name == old.name) {
                d.push(
                    &format!("family {}", old.name),
                    "removed".to_owned(),
                    ChangeClass::Breaking,
                    &format!("its keys stay under `{}`: delete them or keep the family, {FORCE}", old.key),
                );
            }
        }
        for new in &code.families {
            let subject = format!("family {}", new.name);
            let Some(old) = locked.families.iter().find(|f| f.name == new.name) else {
                d.push(&subject, "new family".to_owned(), ChangeClass::Safe, "nothing is stored in it yet; re-bless");
                continue;
            };
            if old.key != new.key || old.word != new.word {
                d.push(
                    &subject,
                    format!("`{} {}` is now `{} {}`", old.word, old.key, new.word, new.key),
                    ChangeClass::Breaking,
                    &format!(
                        "keys stored under `{}` would not be found (or read as another type): keep the template, or \
                         copy the keys to the new template (a copy migration) before the new release reads, {FORCE}",
                        old.key
                    ),
                );
            }
            if old.ttl_ms != new.ttl_ms {
                d.push(
                    &subject,
                    format!("lifetime {} ms is now {} ms", opt_ms(old.ttl_ms), opt_ms(new.ttl_ms)),
                    ChangeClass::Safe,
                    "keys written before keep theirs until written again; re-bless",
                );
            }
        }
        d
    }

    fn push(&mut self, subject: &str, what: String, class: ChangeClass, fix: &str) {
        self.changes.push(LockChange { subject: subject.to_owned(), what, class, fix: fix.to_owned() });
    }

    fn kind(&mut self, old: &LockedKind, new: &LockedKind) {
        let subject = format!("kind {}", new.kind);
        let s = subject.as_str();
        if old.type_name != new.type_name {
            self.push(
                s,
                format!("type `{}` renamed to `{}`", old.type_name, new.type_name),
                ChangeClass::Safe,
                "nothing stored names the type; re-bless",
            );
        }
        match (old.schema, new.schema) {
            (Some(o), Some(n)) if n < o => self.push(
                s,
                format!("schema version {o} went back to {n}"),
                ChangeClass::Breaking,
                &format!("documents stamped {o} would be refused to this release: raise it, never lower it, {FORCE}"),
            ),
            (o, n) if o != n => self.push(
                s,
                format!(
                    "schema version {} is now {}",
                    o.map_or("-".into(), |v| v.to_string()),
                    n.map_or("-".into(), |v| v.to_string())
                ),
                ChangeClass::Safe,
                "re-bless",
            ),
            _ => {}
        }
        if old.key != new.key {
            self.push(
                s,
                format!("document key template `{}` is now `{}`", old.key, new.key),
                ChangeClass::Breaking,
                &format!(
                    "documents stored under `{}` would not be found: keep the template, or copy every document to the \
                     new keys (a copy migration: read each with the old key, write it with the new, then rebuild the \
                     indexes) before the new release serves reads, {FORCE}",
                    old.key
                ),
            );
        }
        self.fields(s, old, new);
        if old.ttl_ms != new.ttl_ms {
            self.push(
                s,
                format!("lifetime {} ms is now {} ms", opt_ms(old.ttl_ms), opt_ms(new.ttl_ms)),
                ChangeClass::Safe,
                "documents written before keep their lifetime until written again; re-bless",
            );
        }
        if old.changes != new.changes || old.outbox != new.outbox {
            self.push(
                s,
                format!(
                    "change stream `{}`/outbox `{}` is now `{}`/`{}`",
                    old.changes.as_deref().unwrap_or("-"),
                    old.outbox.as_ref().map_or("-", |o| o.0.as_str()),
                    new.changes.as_deref().unwrap_or("-"),
                    new.outbox.as_ref().map_or("-", |o| o.0.as_str()),
                ),
                ChangeClass::Breaking,
                &format!(
                    "consumers reading the old stream miss the new release's entries: let them drain it and move them \
                     to the new stream before the new release writes, {FORCE}"
                ),
            );
        }
        if old.registry != new.registry {
            self.push(
                s,
                format!("scope registry `{}` is now `{}`", old.registry, new.registry),
                ChangeClass::Breaking,
                &format!("scopes registered before are not in the new registry: copy its members first, {FORCE}"),
            );
        }
        if old.nudge != new.nudge {
            self.push(
                s,
                format!("nudge channel `{}` is now `{}`", old.nudge, new.nudge),
                ChangeClass::Safe,
                "pollers of the older release wake by their poll interval only until they are replaced; re-bless",
            );
        }
        for (name, text) in &old.indexes {
            if !new.indexes.iter().any(|(n, _)| n == name) {
                self.push(
                    s,
                    format!("index `{name}` dropped"),
                    ChangeClass::Safe,
                    "no read uses it; its keys stay behind until deleted; re-bless",
                );
            } else if let Some((_, t)) = new.indexes.iter().find(|(n, t)| n == name && t != text) {
                self.push(
                    s,
                    format!("layout of index `{name}` changed: `{text}` is now `{t}`"),
                    ChangeClass::Rebuild,
                    &format!(
                        "its stored entries follow the old layout: it is a new, building index; after the deploy, with \
                         no older writer left, rebuild it (`rebuild --kind {} --index {name}`, or the admin tool's \
                         `migrate apply`), which `needs_rebuild` flags until then; re-bless",
                        new.kind
                    ),
                );
            }
        }
        for (name, _) in &new.indexes {
            if !old.indexes.iter().any(|(n, _)| n == name) {
                self.push(
                    s,
                    format!("new index `{name}`"),
                    ChangeClass::Rebuild,
                    &format!(
                        "it holds none of the documents stored before: after the deploy, with no older writer left, \
                         backfill it (`rebuild --kind {} --index {name}`, or the admin tool's `migrate apply`) before \
                         reading it; re-bless",
                        new.kind
                    ),
                );
            }
        }
    }

    /// Fields are stored by position (`CompactJson`): the locked order must
    /// be a prefix of the code's.
    fn fields(&mut self, s: &str, old: &LockedKind, new: &LockedKind) {
        let common = old.fields.iter().zip(&new.fields).take_while(|(a, b)| a == b).count();
        let fix = format!(
            "a `CompactJson` text holds values by position, so stored documents would read into the wrong fields or \
             not at all: restore the locked order ({}) and append new fields last with `#[serde(default)]`, never \
             reorder, insert or remove; or copy the documents (read each with the old type, write it with the new: a \
             copy migration); if no store of this type uses `CompactJson`, positions are not stored: {FORCE}",
            old.fields.join(", ")
        );
        if common < old.fields.len() {
            let removed: Vec<&String> = old.fields.iter().filter(|f| !new.fields.contains(f)).collect();
            let what = if !removed.is_empty() {
                format!(
                    "field{} {} removed",
                    if removed.len() == 1 { "" } else { "s" },
                    removed.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
                )
            } else if old.fields.iter().all(|f| new.fields.contains(f)) && common < new.fields.len() {
                let (was, now) = (&old.fields[common], &new.fields[common]);
                if old.fields.contains(now) {
                    format!("fields reordered: position {common} held `{was}`, now `{now}`")
                } else {
                    format!("field `{now}` inserted at position {common}, before `{was}`")
                }
            } else {
                format!("fields changed from position {common}")
            };
            self.push(s, what, ChangeClass::Breaking, &fix);
        } else if new.fields.len() > old.fields.len() && !old.fields.is_empty() {
            let added: Vec<String> = new.fields[common..].iter().map(|f| format!("`{f}`")).collect();
            self.push(
                s,
                format!("field{} {} appended", if added.len() == 1 { "" } else { "s" }, added.join(", ")),
                ChangeClass::Safe,
                "stored documents read with the new fields missing: give them `#[serde(default)]`; re-bless",
            );
        } else if old.fields.is_empty() && !new.fields.is_empty() {
            self.push(s, "field order recorded".to_owned(), ChangeClass::Safe, "re-bless");
        }
    }

    /// Whether the lock matches the code.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The most severe class among the changes; `None` when there are none.
    pub fn worst(&self) -> Option<ChangeClass> {
        self.changes.iter().map(|c| c.class).max()
    }

    /// The changes as text for a test failure or a command's output: one
    /// paragraph per change with its class and fix, then what to do.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for c in &self.changes {
            let _ = writeln!(out, "[{}] {}: {}\n    fix: {}", c.class.as_str(), c.subject, c.what, c.fix);
        }
        match self.worst() {
            None => out.push_str("the schema lock matches the code\n"),
            Some(ChangeClass::Breaking) => out.push_str(
                "the schema lock does not match the code, and a change above breaks stored data: do its fix; \
                 BLESS=1 will not rewrite the lock while it stands (BLESS=force does, once the data is migrated)\n",
            ),
            Some(_) => out.push_str(
                "the schema lock does not match the code; no change above breaks stored data: do the rebuilds named, \
                 and rewrite the lock with BLESS=1\n",
            ),
        }
        out
    }
}

#[cfg(test)]
mod tests;
