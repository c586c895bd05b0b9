//! One write-script call: its KEYS and ARGV, filled from the operation's
//! layout, run with the shared retry rule, and its reply taken apart.
//!
//! Put and delete fill the same shared positions and the same "caller's
//! read" entries; a put adds its document text, list score and new entries.

use redis::Value;

use microdcs_schema::IndexEntry;
use microdcs_schema::lua::{CommonSlots, DeleteLayout, EntrySlots, IndexSlots, PutIndexSlots, PutLayout, ret};

use super::plan::{NudgeChannel, Plan};
use super::render_err;
use super::step::StepArgs;
use super::types::ReadState;
use crate::client::Valkey;
use crate::config::{Durability, defaults};
use crate::error::{Error, Result, short};
use crate::retry::{self, Invoked, LuaScript};

/// One script argument.
pub(super) enum Arg<'a> {
    Static(&'static str),
    Owned(String),
    Borrowed(&'a str),
}

impl Arg<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Arg::Static(s) => s.as_bytes(),
            Arg::Owned(s) => s.as_bytes(),
            Arg::Borrowed(s) => s.as_bytes(),
        }
    }
}

fn flag(b: bool) -> Arg<'static> {
    Arg::Static(if b { "1" } else { "0" })
}

/// What every write call says about its document.
pub(super) struct WriteTarget<'a> {
    /// The document key.
    pub(super) key: &'a str,
    /// The document id.
    pub(super) id: &'a str,
    /// The scope the write acts in.
    pub(super) scope: &'a str,
    /// The list key, when the type has a list.
    pub(super) list_key: Option<String>,
    /// The expected version as the script takes it.
    pub(super) expect: Arg<'a>,
    /// The operation id.
    pub(super) op: &'a str,
}

/// What a put writes beside its index entries.
pub(super) struct PutBody<'a> {
    /// The document text.
    pub(super) doc: &'a str,
    /// The list score, for a type with a sorted list.
    pub(super) score: Option<String>,
    /// The document's lifetime, for a type with a `ttl`.
    pub(super) ttl_ms: Option<u64>,
    /// Whether a document with a lifetime keeps what it has left (the
    /// script takes `ttl_ms` for one without).
    pub(super) keep_lifetime: bool,
    /// The document's tombstone key.
    pub(super) tomb: String,
}

/// The KEYS and ARGV of one write-script call.
pub(super) struct Call<'a> {
    keys: Vec<String>,
    args: Vec<Arg<'a>>,
    /// The keys of the multi-valued indexes, by index position: appended
    /// after every other key by [`Call::seal`].
    each: std::collections::BTreeMap<usize, EachKeys>,
}

/// The keys of one multi-valued index in a call, and where its counts go.
#[derive(Default)]
struct EachKeys {
    old_count: usize,
    new_count: Option<usize>,
    old: Vec<String>,
    new: Vec<String>,
}

impl<'a> Call<'a> {
    /// A call with the shared positions filled.
    fn new(
        slots: &CommonSlots,
        (num_keys, num_args): (usize, usize),
        plan: &'a Plan,
        valkey: &Valkey,
        kind: &'static str,
        t: WriteTarget<'a>,
    ) -> Result<Self> {
        plan.check_slots(valkey)?;
        // A key the call does not name is the document key, which the
        // script never writes in that role.
        let mut call = Call {
            keys: vec![t.key.to_owned(); num_keys],
            args: (0..num_args).map(|_| Arg::Static("")).collect(),
            each: std::collections::BTreeMap::new(),
        };
        // A delete of a missing document has no scope: the script only
        // reads the hash and the tombstone then.
        if let Some(changes) = plan.changes.as_ref().filter(|_| !t.scope.is_empty()) {
            call.set_key(slots.changes_key, changes.render(valkey.prefix(), &[t.scope]).map_err(render_err)?);
        }
        if let Some(k) = slots.registry_key {
            call.set_key(k, plan.registry_key.clone());
        }
        if let (Some(k), Some(list)) = (slots.list_key, t.list_key) {
            call.set_key(k, list);
        }
        call.set_arg(slots.expect, t.expect);
        call.set_arg(slots.op, Arg::Borrowed(t.op));
        call.set_arg(slots.id, Arg::Borrowed(t.id));
        call.set_arg(slots.scope, Arg::Borrowed(t.scope));
        call.set_arg(slots.kind, Arg::Static(kind));
        match &plan.nudge {
            NudgeChannel::Kind(channel) => call.set_arg(slots.channel, Arg::Borrowed(channel)),
            // A delete of a missing document sends no nudge and has no scope.
            NudgeChannel::Scope(_) if t.scope.is_empty() => {}
            NudgeChannel::Scope(template) => {
                let channel = template.render(valkey.prefix(), &[kind, t.scope]).map_err(render_err)?;
                call.set_arg(slots.channel, Arg::Owned(channel));
            }
        }
        // The server takes a signed 64-bit length; a larger one would fail
        // XADD in the middle of the script, after the first write.
        let max_len = valkey.write_options().change_stream_max_len.min(i64::MAX as u64);
        call.set_arg(slots.maxlen, Arg::Owned(max_len.to_string()));
        Ok(call)
    }

    /// A put call: the shared positions and what the put writes beside its
    /// index entries; those are filled by [`Call::new_entries`] and
    /// [`Call::reads`].
    pub(super) fn put(
        l: &PutLayout,
        plan: &'a Plan,
        valkey: &Valkey,
        kind: &'static str,
        t: WriteTarget<'a>,
        body: PutBody<'a>,
    ) -> Result<Self> {
        let call = Self::new(&l.common, (l.num_keys, l.num_args), plan, valkey, kind, t)?;
        Ok(call.put_body(l, valkey, body))
    }

    /// A step call: a put's positions, then for a type with an outbox its
    /// stream, the event marker and the work entries (after the fixed
    /// positions), then the family effects.
    pub(super) fn step(
        plan: &'a Plan,
        valkey: &Valkey,
        kind: &'static str,
        t: WriteTarget<'a>,
        body: PutBody<'a>,
        step: &'a StepArgs<'a>,
    ) -> Result<Self> {
        let (sl, doc_key) = (&step.plan.layout, t.key);
        let l = &sl.put;
        let call = Self::new(&l.common, (sl.num_keys, sl.num_args), plan, valkey, kind, t)?;
        let mut call = call.put_body(l, valkey, body);
        if let (Some(o), Some(work_key)) = (sl.outbox, &step.work_key) {
            call.set_key(o.work_key, work_key.clone());
            // No event: the marker position names the document key, unused.
            call.set_key(o.marker_key, step.marker_key.clone().unwrap_or_else(|| doc_key.to_owned()));
            call.set_arg(o.marker_flag, flag(step.marker_key.is_some()));
            // Within what the server accepts, whatever a hand-built spec says.
            let ttl = step.marker_ttl_ms.clamp(1, microdcs_schema::lua::MAX_LIFETIME_MS);
            call.set_arg(o.marker_ttl, Arg::Owned(ttl.to_string()));
            call.set_arg(o.entries, Arg::Owned(step.entries.len().to_string()));
            for e in step.entries {
                call.args.push(Arg::Owned(e.fields().len().to_string()));
                for (name, value) in e.fields() {
                    call.args.push(Arg::Borrowed(name));
                    call.args.push(Arg::Borrowed(value));
                }
            }
        }
        // The family effects: KEYS after the fixed ones, four ARGV each.
        call.args.push(Arg::Owned(step.effects.len().to_string()));
        for e in step.effects {
            call.keys.push(e.key.clone());
            call.args.push(Arg::Static(e.op));
            call.args.push(Arg::Borrowed(&e.a));
            call.args.push(Arg::Borrowed(&e.b));
            call.args.push(Arg::Owned(e.ttl_ms.map_or_else(String::new, |ms| ms.to_string())));
        }
        Ok(call)
    }

    /// What a put writes beside its entries, at the put layout's positions.
    fn put_body(mut self, l: &PutLayout, valkey: &Valkey, body: PutBody<'a>) -> Self {
        let PutBody { doc, score, ttl_ms, keep_lifetime, tomb } = body;
        let call = &mut self;
        call.set_arg(l.doc, Arg::Borrowed(doc));
        // The script trusts this count, so it is always within the bounds
        // the configuration enforces, even when set in code.
        let history = valkey.write_options().op_history.clamp(1, defaults::MAX_OP_HISTORY_LENGTH);
        call.set_arg(l.history, Arg::Owned(history.to_string()));
        if let (Some(s), Some(score)) = (l.score, score) {
            call.set_arg(s, Arg::Owned(score));
        }
        call.set_key(l.tomb_key, tomb);
        if let (Some(pos), Some(ms)) = (l.ttl, ttl_ms) {
            let ms = if keep_lifetime { format!("keep:{ms}") } else { ms.to_string() };
            call.set_arg(pos, Arg::Owned(ms));
        }
        self
    }

    /// A delete call: the shared positions and the tombstone key
    /// (`tomb`); the caller's reads are filled by [`Call::reads`].
    pub(super) fn delete(
        l: &DeleteLayout,
        plan: &'a Plan,
        valkey: &Valkey,
        kind: &'static str,
        t: WriteTarget<'a>,
        tomb: Result<String>,
    ) -> Result<Self> {
        let mut call = Self::new(&l.common, (l.num_keys, l.num_args), plan, valkey, kind, t)?;
        call.set_key(l.tomb_key, tomb?);
        // Within the configuration's bounds, whatever was set in code: the
        // server refuses an expiry it cannot add to its clock, and that
        // would fail the script after its first write.
        let ttl =
            valkey.write_options().tombstone_retention.clamp(defaults::MIN_TOMBSTONE_RETENTION, defaults::MAX_DURATION);
        call.set_arg(l.tomb_ttl, Arg::Owned(ttl.as_millis().to_string()));
        Ok(call)
    }

    fn set_key(&mut self, pos: usize, key: String) {
        self.keys[pos - 1] = key;
    }

    fn set_arg(&mut self, pos: usize, arg: Arg<'a>) {
        self.args[pos - 1] = arg;
    }

    /// The key at KEYS position `pos`.
    pub(super) fn key(&self, pos: usize) -> &str {
        pos.checked_sub(1).and_then(|i| self.keys.get(i)).map_or("", String::as_str)
    }

    /// One index entry: its key (the document key when absent), its flag
    /// and its field values (empty when absent).
    fn entry(&mut self, slots: &EntrySlots, key: Option<String>, values: Vec<Option<String>>, doc_key: &str) {
        self.entry_args(slots, key.is_some(), values);
        self.set_key(slots.key, key.unwrap_or_else(|| doc_key.to_owned()));
    }

    /// The entries the put writes, one per index (`None`: not indexed).
    pub(super) fn new_entries<'e>(
        &mut self,
        slots: &[PutIndexSlots],
        entries: impl Iterator<Item = &'e Option<IndexEntry>>,
        doc_key: &str,
    ) {
        for (i, (s, new)) in slots.iter().zip(entries).enumerate() {
            let new = new.as_ref();
            let values: Vec<Option<String>> = s
                .index
                .fields
                .iter()
                .map(|f| new.and_then(|e| e.fields.iter().find(|(n, _)| *n == f.name)).map(|(_, v)| v.clone()))
                .collect();
            if let (Some(old_count), Some(new_count)) = (s.index.old_count, s.new_count) {
                // A multi-valued index: its keys go after all others.
                let each = self.each.entry(i).or_default();
                (each.old_count, each.new_count) = (old_count, Some(new_count));
                each.new = new.map(|e| e.keys().map(str::to_owned).collect()).unwrap_or_default();
                self.entry_args(&s.new, new.is_some(), values);
                continue;
            }
            self.entry(&s.new, new.map(|e| e.key.clone()), values, doc_key);
        }
    }

    /// An entry's flag and values, without its key.
    fn entry_args(&mut self, slots: &EntrySlots, present: bool, values: Vec<Option<String>>) {
        self.set_arg(slots.flag, flag(present));
        for (k, v) in values.into_iter().enumerate() {
            self.set_arg(slots.value(k), v.map_or(Arg::Static(""), Arg::Owned));
        }
    }

    /// Appends the keys of the multi-valued indexes after every other key
    /// (the step's effects included): per index, those read, then the new
    /// ones; with their counts and where they start (`tail`). Last, before
    /// the call is sent.
    pub(super) fn seal(&mut self, tail: Option<usize>) {
        let Some(tail) = tail else { return };
        self.set_arg(tail, Arg::Owned((self.keys.len() + 1).to_string()));
        for each in std::mem::take(&mut self.each).into_values() {
            self.set_arg(each.old_count, Arg::Owned(each.old.len().to_string()));
            if let Some(pos) = each.new_count {
                self.set_arg(pos, Arg::Owned(each.new.len().to_string()));
            }
            self.keys.extend(each.old);
            self.keys.extend(each.new);
        }
    }

    /// The caller's read of every index, from `state` (`None`: nothing read,
    /// so no index entry to replace).
    pub(super) fn reads<'s>(
        &mut self,
        slots: impl Iterator<Item = &'s IndexSlots>,
        plan: &Plan,
        valkey: &Valkey,
        id: &str,
        state: Option<&ReadState>,
        doc_key: &str,
    ) -> Result<()> {
        for (i, (s, ix)) in slots.zip(plan.indexes()).enumerate() {
            let mut old_keys = match state {
                Some(st) => plan.old_keys(ix, valkey, id, st)?,
                None => Vec::new(),
            };
            let values = s
                .fields
                .iter()
                .map(|f| state.and_then(|st| st.fields.get(f.at).cloned().flatten()).filter(|_| !old_keys.is_empty()))
                .collect();
            if let Some(old_count) = s.old_count {
                let present = !old_keys.is_empty();
                let each = self.each.entry(i).or_default();
                each.old_count = old_count;
                each.old = old_keys;
                self.entry_args(&s.old, present, values);
                continue;
            }
            self.entry(&s.old, old_keys.pop(), values, doc_key);
        }
        Ok(())
    }

    /// Runs `script` with these arguments under the shared retry rule: the
    /// scripts recognise an applied operation id, so running one again after
    /// an unknown outcome is safe.
    /// With a [`Durability`] that waits, the wait runs right after the
    /// script on the connection for waiting writes, and its answer comes
    /// back with the reply.
    pub(super) async fn invoke(
        &self,
        valkey: &Valkey,
        script: &LuaScript,
        key: &str,
        durability: &Durability,
    ) -> Result<(Invoked, Option<redis::RedisResult<Value>>)> {
        let mut call = script.call();
        for k in &self.keys {
            call = call.key(k);
        }
        for a in &self.args {
            call = call.arg(a.bytes());
        }
        if durability.waits() {
            let w =
                retry::invoke_waiting(valkey, &call, "write", key, durability).await.map_err(|f| f.into_error(key))?;
            return Ok((Invoked { value: w.value }, Some(w.wait)));
        }
        let reply = retry::invoke_call(valkey, &call, "write", key).await.map_err(|f| f.into_error(key))?;
        Ok((reply, None))
    }
}

/// Whether the wait after a write to `key` at `version` got what
/// `durability` asked for; `wait` is its answer (`None`: no wait asked).
///
/// # Errors
/// [`Error::NotReplicated`] (the write stands) when fewer replicas (or no
/// append-only file) acknowledged it, or the server refused the wait.
pub(super) fn check_wait(
    key: &str,
    version: u64,
    durability: &Durability,
    wait: Option<redis::RedisResult<Value>>,
) -> Result<()> {
    let Some(wait) = wait else { return Ok(()) };
    let short_of = |acked: u32, reason: String| Error::NotReplicated {
        key: key.to_owned(),
        version,
        acked,
        wanted: durability.replicas,
        reason,
    };
    let count = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
    let (local, acked) = match wait {
        Ok(Value::Int(n)) if !durability.aof => (true, count(n)),
        Ok(Value::Array(v)) if durability.aof => match v.as_slice() {
            [Value::Int(local), Value::Int(n)] => (*local >= 1, count(*n)),
            _ => return Err(Error::Protocol { script: "WAITAOF", reply: short(&v) }),
        },
        Ok(other) => return Err(Error::Protocol { script: "WAIT", reply: short(&other) }),
        Err(e) => return Err(short_of(0, format!("the server refused the wait ({e})"))),
    };
    let within = durability.bound();
    if !local {
        return Err(short_of(acked, format!("the primary's append-only file did not have it within {within:?}")));
    }
    if acked < durability.replicas {
        let wanted = durability.replicas;
        return Err(short_of(acked, format!("{acked} of {wanted} replica(s) acknowledged it within {within:?}")));
    }
    Ok(())
}

/// What a write script answered: the one reading of the `{code, ...}`
/// replies of the put, step and delete scripts.
pub(super) enum Reply {
    /// Written now, or recognised as written before by its operation id
    /// (`already`); `values`: what a step's family effects returned (a
    /// step written now only).
    Written { version: u64, already: bool, values: Vec<i64> },
    /// The expectation failed: the stored version.
    Conflict { current: u64 },
    /// The document expected is not there.
    NotFound,
    /// (A step.) The event was applied already, by the step of `job`.
    EventApplied { job: String },
    /// The document is stored in scope `stored`.
    WrongScope { stored: String },
    /// The unique index at `index` (1-based, in the layout's order) is held
    /// by document `holder`.
    UniqueViolation { index: usize, holder: String },
    /// The index fields moved since they were read: what is stored now,
    /// for the next attempt.
    Retry(Vec<Option<String>>),
    /// A newer schema wrote the document (its stamp is `stored`): nothing
    /// was written.
    SchemaBehind { stored: u64 },
}

/// Reply `v` of write script `script` to a write of `key`. `step`: the
/// step script, whose written reply carries its effects' values and which
/// alone answers that an event was applied.
///
/// # Errors
/// [`Error::Corrupt`] (and the effect errors of [`corrupt_reply`]) for a
/// damaged document; [`Error::Protocol`] for a reply no script sends.
pub(super) fn decode(script: &'static str, key: &str, v: &Value, step: bool) -> Result<Reply> {
    let (code, rest) = split_reply(script, v)?;
    Ok(match code {
        ret::WRITTEN | ret::ALREADY_APPLIED => {
            let version = int_at(script, rest, 0)?;
            let already = code == ret::ALREADY_APPLIED;
            let values = if step && !already { effect_values(script, rest)? } else { Vec::new() };
            Reply::Written { version, already, values }
        }
        ret::CONFLICT => Reply::Conflict { current: int_at(script, rest, 0)? },
        ret::NOT_FOUND => Reply::NotFound,
        ret::EVENT_APPLIED if step => Reply::EventApplied { job: str_at(script, rest, 0)? },
        ret::WRONG_SCOPE => Reply::WrongScope { stored: str_at(script, rest, 0)? },
        ret::UNIQUE_VIOLATION => Reply::UniqueViolation {
            index: usize::try_from(int_at(script, rest, 0)?).unwrap_or(0),
            holder: str_at(script, rest, 1)?,
        },
        ret::CORRUPT => return Err(corrupt_reply(script, key, rest)),
        ret::SCHEMA_BEHIND => Reply::SchemaBehind { stored: int_at(script, rest, 0)? },
        ret::RETRY => Reply::Retry(texts(script, rest)?),
        _ => return Err(Error::Protocol { script, reply: short(v) }),
    })
}

/// What a step's family effects returned: the reply's third element, one
/// integer per effect (an empty Lua table comes back as an empty array).
fn effect_values(script: &'static str, rest: &[Value]) -> Result<Vec<i64>> {
    match rest.get(1) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::Int(n) => Ok(*n),
                // An increment's result, as the stored text (exact past 2^53).
                Value::BulkString(b) => std::str::from_utf8(b)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .ok_or_else(|| Error::Protocol { script, reply: short(v) }),
                other => Err(Error::Protocol { script, reply: short(other) }),
            })
            .collect(),
        Some(other) => Err(Error::Protocol { script, reply: short(other) }),
    }
}

/// The return code and the rest of a `{code, ...}` reply.
pub(super) fn split_reply<'a>(script: &'static str, v: &'a Value) -> Result<(i64, &'a [Value])> {
    if let Value::Array(items) = v
        && let Some(Value::Int(code)) = items.first()
    {
        return Ok((*code, &items[1..]));
    }
    Err(Error::Protocol { script, reply: short(v) })
}

/// The non-negative integer at `i` of a reply's rest.
pub(super) fn int_at(script: &'static str, rest: &[Value], i: usize) -> Result<u64> {
    match rest.get(i) {
        Some(Value::Int(n)) if *n >= 0 => Ok(*n as u64),
        other => Err(Error::Protocol { script, reply: short(&other) }),
    }
}

/// The string at `i` of a reply's rest.
pub(super) fn str_at(script: &'static str, rest: &[Value], i: usize) -> Result<String> {
    match rest.get(i) {
        Some(Value::BulkString(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
        Some(Value::SimpleString(s)) => Ok(s.clone()),
        other => Err(Error::Protocol { script, reply: short(&other) }),
    }
}

/// The values after the code of a reply, each a text or nil (`None`):
/// the stored state a `{5, ...}` reply carries.
pub(super) fn texts(script: &'static str, rest: &[Value]) -> Result<Vec<Option<String>>> {
    rest.iter()
        .map(|v| match v {
            Value::Nil => Ok(None),
            Value::BulkString(b) => Ok(Some(String::from_utf8_lossy(b).into_owned())),
            Value::SimpleString(s) => Ok(Some(s.clone())),
            other => Err(Error::Protocol { script, reply: short(other) }),
        })
        .collect()
}

/// The error for a `{6, field}` (corrupt hash) or `{6, 'v', 'limit'}`
/// (version at its limit) reply.
pub(super) fn corrupt_reply(script: &'static str, key: &str, rest: &[Value]) -> Error {
    let field = str_at(script, rest, 0).unwrap_or_default();
    let effect_key = || str_at(script, rest, 1).unwrap_or_default();
    match field.as_str() {
        "effect" => {
            return Error::Corrupt {
                key: effect_key(),
                reason: "an increment effect found no 64-bit integer there; nothing was written".to_owned(),
            };
        }
        // A valid count, too large for the bound that keeps every sum of
        // the write's increments from overflowing: the caller's to handle.
        "effect-range" => {
            return Error::InvalidArgument(format!(
                "`{}` holds an integer of more than {} characters, beyond what an increment effect adds to (so \
                 that no sum can overflow halfway through the write); nothing was written",
                effect_key(),
                microdcs_schema::lua::MAX_EFFECT_INTEGER_LEN
            ));
        }
        "effect-type" => {
            return Error::WrongType {
                key: effect_key(),
                detail: "an effect's family key holds another Valkey type; nothing was written".to_owned(),
            };
        }
        _ => {}
    }
    let limit = str_at(script, rest, 1).is_ok_and(|s| s == "limit");
    let reason = match field.as_str() {
        "v" if limit => format!(
            "the version is at its limit {}; the document cannot be written again (delete and create it)",
            microdcs_schema::lua::MAX_VERSION
        ),
        "v" => VERSION_REASON.to_owned(),
        "ops" => "`ops` is not a history of whole operation ids that the version can account for".to_owned(),
        "tomb" => "its tombstone is not `<version>:<operation ids>`".to_owned(),
        "sv" => "its schema stamp `sv` is not a schema version (decimal, no sign or leading zero)".to_owned(),
        f => format!("`{f}` is missing"),
    };
    Error::Corrupt { key: key.to_owned(), reason }
}

/// Why a stored `v` is refused (the same words for reads and writes).
pub(super) const VERSION_REASON: &str =
    "`v` is missing or not a version (1 to 2^53-1 in decimal, no sign or leading zero)";
