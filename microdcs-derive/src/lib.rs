//! Proc macros of microdcs. Use them through `microdcs-valkey`, which
//! re-exports them with the runtime they expand to.
//!
//! - `#[derive(Document)]`: key builders, the document spec, index entries;
//!   its docs are the reference of the `#[microdcs(...)]` attributes.
//! - `#[derive(KeySegment)]`: an enum without fields as a key segment and
//!   index value.
//! - `keyspace!`: a keyspace of document types and other key families, with a
//!   compile-time check that no two families can render the same key.
//!
//! Parsing maps syn into the `microdcs-schema` model; every rule lives there.
#![forbid(unsafe_code)]

mod ast;
mod attr;
mod check;
mod ctxt;
mod each;
mod expand;
mod fallback;
mod field_shape;
mod keys;
mod keyspace;
mod runtime;
mod segment;
mod spec;

use proc_macro::TokenStream;

/// Derives `microdcs_valkey::Document` for a struct with named fields: typed
/// key builders, index queries, the index entries of a document and its
/// compare-and-set scripts, all from a declarative key schema that is checked
/// at compile time.
///
/// Use it through `microdcs_valkey` (`use microdcs_valkey::Document;`); the
/// expansion names `::microdcs_valkey` paths. The examples below are compiled
/// and run by the trybuild case `tests/ui/pass/attribute_reference.rs`.
///
/// ```ignore
/// #[derive(Debug, Clone, Copy, PartialEq, Eq, KeySegment)]
/// #[microdcs(rename_all = "snake_case")]
/// pub enum TaskStatus {
///     NotStarted,
///     Running,
///     #[microdcs(rename = "held")]
///     OnHold,
/// }
///
/// #[derive(Document)]
/// #[microdcs(
///     kind = "task",                                           // default: the type name in lower case
///     key = "task:{id}",                                       // default: "{kind}:{id}"
///     list(key = "task:list:{scope}", score = due),            // per-scope sorted set, ordered by `due`
///     unique(key = "task:bycode:{code}", code = external_code),  // `{code}` from field `external_code`
///     group(key = "task:bystatus:{scope}:{status}"),           // `{status}` from field `status`
///     group(key = "task:bytag:{scope}:{tag}", tag = tag_text()), // `{tag}` from a method
/// )]
/// pub struct Task {
///     pub id: String,
///     pub scope: String,
///     pub external_code: Option<String>,
///     pub status: TaskStatus,
///     pub due: i64,
///     pub tags: Vec<String>,
/// }
///
/// impl Task {
///     /// The tags joined with `,`; no tags is empty text: in no tag group.
///     pub fn tag_text(&self) -> String {
///         self.tags.join(",")
///     }
/// }
/// ```
///
/// The attributes go in one or more `#[microdcs(...)]` on the struct (they
/// add up) and `#[microdcs(id)]` / `#[microdcs(scope)]` on fields. Every
/// problem is reported at the tokens it is about, all in one build.
///
/// # What is generated
///
/// - `impl Document for T`: `SPEC` (the checked schema), the put, delete and
///   find Lua scripts, `id()`, `scope()`, and `index_entries(&prefix)`: every
///   key the document occupies, used by writes and by verification alike.
/// - Key builders, each `fn(&KeyPrefix, values...) -> Result<String, KeyError>`
///   with one `&(impl KeySegment + ?Sized)` parameter per placeholder, in
///   template order and named after it (a keyword such as `{type}` becomes
///   `type_`): `T::key(&prefix, id)`, `T::list_key(&prefix, scope)` (with a
///   `list`), and `T::<index>_key(&prefix, ...)` per index.
/// - Queries, one per index and named after it: `T::<index>(values...)` returns
///   a `UniqueQuery<T>` (run it with `Store::find`) for a unique index and a
///   `GroupQuery<T>` (`Store::ids`) for a group index.
///
/// ```ignore
/// let prefix = KeyPrefix::default();
/// assert_eq!(Task::key(&prefix, "t-1")?, "microdcs:task:t-1");
/// assert_eq!(Task::list_key(&prefix, "s1")?, "microdcs:task:list:s1");
/// assert_eq!(Task::by_code_key(&prefix, "c:7")?, "microdcs:task:bycode:c%3A7");
/// assert_eq!(Task::by_status_key(&prefix, "s1", &TaskStatus::Running)?, "microdcs:task:bystatus:s1:running");
/// let find = Task::by_code("c-7"); // UniqueQuery<Task>: run it with Store::find
/// let ids = Task::by_status("s1", &TaskStatus::OnHold); // GroupQuery<Task>: run it with Store::ids
/// assert_eq!(ids.values(), ["s1", "held"]);
///
/// let task = Task {
///     id: "t-1".into(),
///     scope: "s1".into(),
///     external_code: None,
///     status: TaskStatus::Running,
///     due: 1_700_000_000,
///     tags: vec![],
/// };
/// let entries = task.index_entries(&prefix)?;
/// assert_eq!(entries.key, "microdcs:task:t-1");
/// assert_eq!(entries.list.map(|l| l.score), Some(Some(1_700_000_000.0)));
/// assert!(entries.unique[0].is_none(), "no code (None): not in by_code");
/// assert_eq!(entries.groups[0].as_ref().map(|e| e.key.as_str()), Some("microdcs:task:bystatus:s1:running"));
/// assert!(entries.groups[1].is_none(), "no tags (empty text): in no tag group");
/// ```
///
/// Values are encoded, so a value never adds a segment: `c:7` is written
/// `c%3A7` (see the key rules in the `microdcs_valkey` docs).
///
/// # Container attributes
///
/// ## `kind = "..."` and `key = "..."`
///
/// `kind` names the type in change entries and nudge channels: a lower-case
/// identifier (`[a-z][a-z0-9_]*`), by default the type name in lower case.
/// `key` is the document key template, by default `"{kind}:{id}"`; it must
/// contain `{id}`, and may contain `{scope}` besides (no other placeholder).
///
/// ```ignore
/// #[derive(Document)]
/// #[microdcs(kind = "workorder", key = "wo:{id}")]
/// pub struct WorkOrder {
///     pub id: String,
///     pub scope: String,
/// }
/// ```
///
/// With `{scope}` in the key, ids are unique per scope only: two tenants
/// may both hold a `t-1`. A document is then named by its scope and id
/// (`Store::get_in`, `delete_id(..).in_scope(..)`, `get_many_in`, `key_in`; the id-only
/// forms refuse), every index key must hold `{scope}` too (an entry holds
/// an id, which names a document only within its scope; a compile error
/// otherwise), and unique lookups, claims, document pages, tombstones and
/// `verify`/`rebuild` all work per scope.
///
/// ```ignore
/// #[derive(Document)]
/// #[microdcs(
///     kind = "ticket",
///     key = "ticket:{scope}:{id}",
///     unique(key = "ticket_ref:{scope}:{reference}"),
/// )]
/// pub struct Ticket {
///     pub id: String,
///     pub scope: String,
///     pub reference: String,
/// }
/// ```
///
/// ## `list(key = "...", score = ...)`
///
/// The per-scope list of the type. Its key must contain `{scope}` and no other
/// placeholder. With `score` it is a sorted set ordered by that number; without
/// it, a plain set. The score is a field (`score = due`) or a `&self` method
/// (`score = rank()`) of an integer or float type (the `Score` trait; sorted-set
/// scores are `f64`). A NaN or infinite score is refused when writing.
///
/// ```ignore
/// #[derive(Document)]
/// #[microdcs(list(key = "alarm:list:{scope}"))] // no score: a plain set
/// pub struct Alarm {
///     pub id: String,
///     pub scope: String,
/// }
///
/// #[derive(Document)]
/// #[microdcs(list(key = "batch:list:{scope}", score = rank()))]
/// pub struct Batch {
///     pub id: String,
///     pub scope: String,
///     pub priority: u8,
/// }
///
/// impl Batch {
///     pub fn rank(&self) -> f64 {
///         f64::from(self.priority) * 10.0
///     }
/// }
/// ```
///
/// ## `unique(...)` and `group(...)`
///
/// An index. A unique index maps its values to one document (a second document
/// with the same values is refused when writing); a group index is a set of the
/// ids that share the values. Inside the parentheses:
///
/// - `key = "..."` (required): the index key template.
/// - `name = "..."`: the index name, a Rust identifier. By default `by_` and the
///   last placeholder that is not `{scope}` (`task:bystatus:{scope}:{status}`
///   is `by_status`); an index whose only placeholder is `{scope}` needs a name.
///   The name names the generated `<name>_key` builder and `<name>` query.
/// - `p = field`: placeholder `{p}` takes its value from field `field`.
/// - `p = method()`: `{p}` takes its value from `self.method()`, a `&self`
///   method without arguments; use it for a derived value (a joined `Vec`, a
///   normalized text).
///
/// A placeholder without a binding takes the field of the same name; `{id}` and
/// `{scope}` always take the document's id and scope and cannot be rebound. A
/// placeholder name is an identifier; index placeholders are stored as hash
/// fields of the document (so the next write can move its entries), which is
/// why `v`, `scope`, `op`, `doc`, `ops` and `score` are reserved, and why a
/// placeholder used by two indexes must come from the same source in both.
///
/// ```ignore
/// #[derive(Document)]
/// #[microdcs(
///     unique(key = "machine:byserial:{serial}"),                     // index `by_serial`, field `serial`
///     unique(key = "machine:byasset:{asset}", asset = asset_number), // index `by_asset`, field `asset_number`
///     group(key = "machine:byline:{scope}:{line}", line = line_name()), // index `by_line`, a method
///     group(name = "in_hall", key = "machine:hall:{scope}:{hall}"),  // named explicitly
/// )]
/// pub struct Machine {
///     pub id: String,
///     pub scope: String,
///     pub serial: String,
///     pub asset_number: Option<u32>,
///     pub hall: u16,
///     pub line: Option<String>,
/// }
///
/// impl Machine {
///     /// Empty when the machine is on no line: then it is in no line group.
///     pub fn line_name(&self) -> &str {
///         self.line.as_deref().unwrap_or("")
///     }
/// }
/// ```
///
/// ## `changes = "..."`, `nudge = "..."`, `registry = "..."`
///
/// The shared families a write appends to: the change stream (default
/// `"changes:{scope}"`, exactly the placeholder `{scope}`), the nudge channel
/// (default `"nudge:{kind}"`, exactly `{kind}`) and the scope registry (default
/// `"scopes"`, no placeholder). Set them to give a type its own; a keyspace
/// listing the type must declare each one, with that type (`stream`, `channel`,
/// `set`).
///
/// A sharded type (document key with `{#scope}`) may give its nudge the
/// scope as its tag, `nudge = "nudge:{kind}:{#scope}"`: one shard channel per
/// scope, sent with `SPUBLISH` in the scope's slot, which a cluster carries
/// only to that scope's primary and replicas; the poller subscribes to each
/// scope's channel as it finds the scope. On any other type it is refused.
///
/// ```ignore
/// #[derive(Document)]
/// #[microdcs(changes = "audit:changes:{scope}", nudge = "audit:nudge:{kind}", registry = "audit:scopes")]
/// pub struct AuditEntry {
///     pub id: String,
///     pub scope: String,
/// }
/// ```
///
/// `changes = none`: writes of the type append no change entry and publish
/// no nudge (no `XADD`/`PUBLISH` cost when nobody consumes them); consuming
/// its changes (`Changes::new`) does not compile, and `nudge` is refused.
///
/// ## `member(key = "...", when = method(), ...)` and `sorted(key = "...", score = field, max = N, ...)`
///
/// A conditional group keeps the id in a set while a `bool` field or method
/// is true; a sorted index keeps it in a sorted set scored by a number (or
/// an `Option` of one; `None` leaves it out), bounded to the `N` highest
/// scores with `max`. Both bind placeholders like `group`, and keep their
/// marker or score in the hash field named after the index. Each takes a
/// `name = "..."` like the other indexes (`member(key =
/// "job:running:{scope}", when = is_running(), name = "running")`,
/// `sorted(key = "job:due:{scope}", score = due, name = "due")`).
///
/// A sorted score, like a list's, must be finite: a NaN or infinite score is
/// refused with `Error::Index`, nothing written. With `max = N` the set is
/// trimmed to the `N` highest scores by the write that adds one, and
/// `verify` does not count the evicted ids as missing.
///
/// ## `each(key = "...", value = field_or_method, name = "...")`
///
/// A multi-valued index: `each(key = "ticket:bytag:{scope}:{tag}", tag =
/// tags, name = "by_tag")` puts the document in one set per distinct value
/// of `tags`, a field or `&self` method giving a `Vec`, a slice, a
/// `BTreeSet` or `HashSet`, or an `Option` of one, of index values (the
/// `IndexValues` trait). Every write moves it exactly: out of the sets of
/// the values it dropped, into those of the values it gained, untouched
/// where a value stays, all in the write's one script (the keys of the
/// values read and of the new ones are passed as `KEYS`, so the script
/// stays in one slot on a cluster). Empty values are left out and repeats
/// merged; more than 256 distinct values is `Error::Index`
/// (`TooManyValues`), nothing written. The document hash keeps the values,
/// encoded and joined by `|`, in the field named after the index, so every
/// write, `verify` and `rebuild` know the entries from the hash alone.
/// Rules, each a compile error at the attribute: exactly one value
/// placeholder besides `{scope}`, no `{id}`, no `when` or `score`, and the
/// value must be a collection (`IndexValues`).
///
/// ## `ttl = "..."`
///
/// A lifetime for the documents in the settings' duration grammar (`"90s"`,
/// `"30m"`, `"1h30m"`, `"500ms"`, `"00:30:00"`), set again by every write
/// for the document and its unique index keys in the same script, so they
/// expire together. A type with a lifetime has no list and no group index:
/// their entries would outlive the documents, and the build fails with an
/// error pointing at the index.
///
/// ## `unscoped`
///
/// A type whose documents belong to no scope (a control-plane table, a
/// global registry): it needs no scope field (a field named `scope` is an
/// ordinary field then), every document reads as the scope `UNSCOPED`
/// (`"_"`), which the registry, its change entries and nudges carry (its
/// hash leaves the field out, to save memory), its
/// list is one global set whose key has no placeholder (read it with
/// `Store::list_all`), and no index may use `{scope}`.
///
/// ```ignore
/// #[derive(Document)]
/// #[microdcs(unscoped, key = "tasks:{id}", list(key = "index:tasks"), group(key = "tasks:bystatus:{status}"))]
/// struct Task {
///     id: String,
///     status: String,
///     // An ordinary field, not the scope.
///     scope: String,
/// }
/// ```
///
/// ## `schema = N`
///
/// The schema version of this release of the type, a whole number from 1
/// (the default) to 1 000 000. Raise it by one in a release that changes
/// what a document holds (adds a field, an index): every write of that
/// release stamps the document with it (hash field `sv`; schema 1 writes
/// none), and a write of an older release to a stamped document is refused
/// with `Error::SchemaBehind`, nothing written, so it never erases a value
/// or an index entry it does not know. Reads are unaffected. It is
/// `SPEC.schema` at run time. The guide's "Evolving a type" has the
/// rolling-deploy recipe.
///
/// ```ignore
/// #[derive(serde::Serialize, serde::Deserialize, Document)]
/// #[microdcs(kind = "order", schema = 2, sorted(key = "order:bytotal:{scope}", score = total, name = "by_total"))]
/// struct Order {
///     id: String,
///     scope: String,
///     total: i64,
///     // New in schema 2: documents written before read it as `None`.
///     #[serde(default)]
///     gift_note: Option<String>,
/// }
/// ```
///
/// ## `outbox(stream = "...", events = "...", event_ttl = "...")`
///
/// Gives the type a workflow step (`Store::step`): one generated script
/// that compares the version, stores the document with its indexes,
/// appends work entries to `stream` (exactly `{scope}`; never trimmed by
/// length) and, for a step that carries an event, checks and sets its
/// marker `events` (placeholders among `{scope}`, `{source}` and the
/// event's `{id}`, which it needs), kept `event_ttl` (default `"1h"`). A
/// redelivered event finds its marker and the step writes nothing. Both
/// are shared families: the keyspace declares them, as `stream(...)` and
/// `string(...)`.
///
/// ```ignore
/// #[derive(Document)]
/// #[microdcs(
///     key = "sfc:state:{id}",
///     outbox(stream = "sfc:work:{scope}", events = "sfc:event:{scope}:{source}|{id}"),
/// )]
/// pub struct SfcState {
///     pub id: String,
///     pub scope: String,
///     pub step: String,
/// }
/// ```
///
/// ## `crate = "..."`
///
/// The path generated code names the runtime by, `::microdcs_valkey` when
/// absent (as serde's `crate` attribute): for an application that reaches
/// the runtime through a re-export or under another name, say
/// `#[microdcs(crate = "crate::infra::store")]`. `#[derive(KeySegment)]`
/// and `keyspace!` (`#[microdcs(crate = "...")]` before the keyspace's
/// name) take it too. A path that names nothing fails the build there.
///
/// # Field attributes: `#[microdcs(id)]` and `#[microdcs(scope)]`
///
/// The id is the field marked `#[microdcs(id)]`, else the field named `id`; the
/// scope likewise. Both must be key segments (text or an integer).
///
/// ```ignore
/// #[derive(Document)]
/// #[microdcs(list(key = "reading:list:{scope}", score = seq))]
/// pub struct Reading {
///     #[microdcs(id)]
///     pub seq: u64,
///     #[microdcs(scope)]
///     pub station: String,
/// }
/// ```
///
/// # Index values
///
/// A field or method bound to an index placeholder must be an index value
/// (`IndexValue`): a key segment (`KeySegment`: `String`, `&str`, `Cow<str>`,
/// `Box<str>`, `char`, an integer, an enum with `#[derive(KeySegment)]`, or
/// your own impl) or an `Option` of one. An index value of empty text or `None`
/// means "not indexed": the document is in no entry of that index (a task
/// without tags is in no tag group). For any other type, such as a `Vec`, bind a
/// method that returns text.
///
/// # Template rules
///
/// A template is segments split by `:`, each made of parts split by `|`; a part
/// is a literal of `[A-Za-z0-9_.-]` or one `{placeholder}`. Of the hash-tag
/// placeholders `{#name}`, a document type takes `{#scope}` only: in its
/// document key it shards the type by scope (each scope's keys in one
/// cluster slot), and then every key its scripts touch (list, indexes,
/// change stream, outbox stream, event markers) must carry `{#scope}` too,
/// or the build fails, one error per key naming the fix. No two families of
/// a type may be able to render the same key (two templates can only do so when
/// they have the same shape and equal literals wherever both have one: a
/// placeholder takes any one segment, so `x:{#scope}:{id}` and a list
/// `x:{#scope}:name` collide, and the error suggests `x:list:{#scope}:name`);
/// across types that is the job of `keyspace!`. Templates name the scope
/// `{scope}` (`{#scope}` as the tag) whatever its field is called.
#[proc_macro_derive(Document, attributes(microdcs))]
pub fn derive_document(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    with_runtime(&input.attrs, || expand::derive(&input))
}

/// Derives `microdcs_valkey::KeySegment` for an enum without fields, so it can
/// be an id, a scope, a query argument or an index value (also inside an
/// `Option`), like a `String`.
///
/// Each variant is written as its name, changed by a `rename_all` rule on the
/// enum or replaced by `rename` on the variant:
///
/// ```ignore
/// #[derive(Debug, Clone, Copy, PartialEq, Eq, KeySegment)]
/// #[microdcs(rename_all = "snake_case")]
/// pub enum TaskStatus {
///     NotStarted,
///     Running,
///     #[microdcs(rename = "held")]
///     OnHold,
/// }
/// ```
///
/// `TaskStatus::NotStarted` is written `not_started`, `TaskStatus::OnHold`
/// `held`. The rules are serde's: `lowercase`, `UPPERCASE`, `PascalCase`,
/// `camelCase`, `snake_case`, `SCREAMING_SNAKE_CASE`, `kebab-case` and
/// `SCREAMING-KEBAB-CASE`.
///
/// It is refused on a struct or union, on variants with fields (implement
/// `KeySegment` by hand, or bind the placeholder to a method), for an unknown
/// rule, and when a variant would be written as empty text (which means "not
/// indexed") or as the same text as another variant (the two would share
/// every index entry).
#[proc_macro_derive(KeySegment, attributes(microdcs))]
pub fn derive_key_segment(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    with_runtime(&input.attrs, || segment::derive(&input))
}

/// Declares a keyspace: the document types and the other key families of one
/// application, with a key builder per family and a compile-time check that no
/// two families can render the same key.
///
/// ```ignore
/// microdcs_valkey::keyspace! {
///     /// Every key of the task service.
///     pub Tasks {
///         documents: [Task, WorkOrder, Alarm, Batch, Machine, Reading, AuditEntry],
///         scopes: set("scopes"),                        // shared by all types but AuditEntry
///         changes: stream("changes:{scope}"),
///         nudge: channel("nudge:{kind}"),
///         audit_scopes: set("audit:scopes"),            // AuditEntry's own
///         audit_changes: stream("audit:changes:{scope}"),
///         audit_nudge: channel("audit:nudge:{kind}"),
///         dedupe: string("ce:dedupe:{hash}"),           // not documents
///         settings: hash("settings:{scope}"),
///         ranking: zset("ranking:{scope}:{board}"),
///         lease: string("lease:{#resource}:owner"),     // hash tag: one cluster slot per resource
///     }
/// }
/// ```
///
/// # Syntax
///
/// ```text
/// keyspace! {
///     /// docs and other attributes
///     <visibility> <Name> {
///         documents: [<DocumentType>, ...],
///         <family>: <type>("<template>"),
///         ...
///     }
/// }
/// ```
///
/// `documents` lists types with `#[derive(Document)]`. Each family is a name
/// (a Rust identifier, unique in the keyspace) and a Valkey type: `string`,
/// `hash`, `set`, `zset` (sorted set), `stream`, or `channel` (a pub/sub
/// channel, compared only with other channels). Templates follow the rules of
/// `#[derive(Document)]`; a family may use hash-tag placeholders `{#name}`,
/// whose value is written inside braces so that all keys with the same value
/// share a cluster slot. `#[microdcs(crate = "...")]` among the attributes
/// names the runtime's path, as on `#[derive(Document)]`.
///
/// `shard: scope` makes the keyspace sharded by scope: every document type
/// in it must be sharded (`{#scope}` in its document key), which the build
/// checks, listing each key of a type that is not and its per-scope form.
///
/// # What is generated
///
/// A unit struct `<Name>` with:
///
/// - `<Name>::SPEC`: the `KeyspaceSpec` with every document's spec and family.
/// - `<Name>::<family>_key(&prefix, values...)` per family, or
///   `<Name>::<family>_channel(...)` for a channel, with one parameter per
///   placeholder as for the document builders.
///
/// ```ignore
/// let prefix = KeyPrefix::default();
/// assert_eq!(Tasks::dedupe_key(&prefix, "9f2c")?, "microdcs:ce:dedupe:9f2c");
/// assert_eq!(Tasks::ranking_key(&prefix, "s1", "weekly")?, "microdcs:ranking:s1:weekly");
/// assert_eq!(Tasks::nudge_channel(&prefix, "task")?, "microdcs:nudge:task");
/// assert_eq!(Tasks::lease_key(&prefix, "press-7")?, "microdcs:lease:{press-7}:owner");
/// assert_eq!(Tasks::SPEC.documents.len(), 7);
/// ```
///
/// # Compile-time checks
///
/// Declared families are checked when the macro expands (template syntax,
/// unique names, overlaps between them), with errors at their templates. The
/// document families are compared with everything else in a constant that is
/// evaluated during the build: if any two families of the keyspace can render
/// the same key (say `joborder:{id}` and another type's list
/// `joborder:{scope}`), or a document type uses a change stream, nudge channel
/// or scope registry that the keyspace does not declare with that type, the
/// build fails at the keyspace's name with every problem, one per line:
///
/// ```text
/// error[E0080]: evaluation panicked: keyspace `Plant` has 2 problems:
///               - key families overlap: document key `joborder:{id}` of `JobOrder` and list `joborder:{scope}` of `Archive` can render the same key
///               - document types `JobOrder` and `Archive` use the stream `changes:{scope}`, which keyspace `Plant` does not declare; add `changes: stream("changes:{scope}")`
/// ```
#[proc_macro]
pub fn keyspace(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as keyspace::KeyspaceInput);
    with_runtime(input.attrs(), || keyspace::expand(&input))
}

/// Runs one expansion with the runtime path `#[microdcs(crate = "...")]`
/// names among `attrs` (default `::microdcs_valkey`).
fn with_runtime(attrs: &[syn::Attribute], expand: impl FnOnce() -> proc_macro2::TokenStream) -> TokenStream {
    match runtime::override_in(attrs) {
        Ok(path) => {
            let _scope = runtime::Scope::enter(path);
            expand().into()
        }
        Err(e) => e.to_compile_error().into(),
    }
}
