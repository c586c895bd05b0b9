//! The step script: the put script of a type with an outbox, plus its
//! work entries and its applied-event marker. The put generator writes the
//! text (`put::generate`); this module adds the step's parts at the points
//! it calls them.

use super::ret::EVENT_APPLIED;
use std::fmt::Write as _;

use super::layout::StepLayout;
use super::text::Described;
use crate::spec::DocumentSpec;

pub(super) const RETURNS: &str = "\
--   {1, version, values}  a step written now: `values` are what its family effects returned, in order
";

/// What a step of a type with an outbox may answer beside [`RETURNS`].
pub(super) const OUTBOX_RETURNS: &str = "\
--   {8, job}              the step's event was applied already, by the step of document `job`;
--                         nothing written (checked after the operation id: a retry of the
--                         step that set the marker reports {7, version})
";

/// The step script of `spec`, with its layout: the put, plus its family
/// effects (counter and hash increments, set and sorted-set adds and
/// removes on declared families) and, for a type with an outbox, the work
/// entries appended to the outbox stream (no length cap: work leaves the
/// stream only once acknowledged) and the event marker checked and set,
/// all in the one script. A type without an outbox has one too: its
/// writes with family effects.
///
/// The marker is checked after the op-history lookup, so a retry of a step
/// that applied (reply lost) reports its own write, not "event applied";
/// the stream, the marker and every effect key are validated by reads
/// before the first write, like every other key.
pub fn step_script(spec: &DocumentSpec<'_>) -> (String, StepLayout) {
    let l = StepLayout::new(spec);
    (super::put::generate(spec, &l.put, Some(&l)), l)
}

pub(super) fn describe(spec: &DocumentSpec<'_>, s: &StepLayout, keys: &mut Vec<Described>, argv: &mut Vec<Described>) {
    const EFFECTS: &str = "the number of family effects m and per effect: `incr` n | `hincr` field n | \
         `sadd`/`srem` member | `zadd` member score | `zrem` member, padded to three, and the family's lifetime \
         in ms or ''; effect i acts on KEYS[fixed + i]";
    let (Some(o), Some(slots)) = (spec.outbox, s.outbox) else {
        argv.push((s.num_args + 1, EFFECTS.into()));
        return;
    };
    keys.push((slots.work_key, format!("work stream `{}` (XADD, no MAXLEN)", o.stream)));
    keys.push((
        slots.marker_key,
        format!("applied-event marker `{}` (KEYS[1] when the step carries no event)", o.events.unwrap_or("-")),
    ));
    argv.push((slots.marker_flag, "`1` if the step carries an event, else `0`".into()));
    argv.push((slots.marker_ttl, "the marker's lifetime in milliseconds".into()));
    argv.push((
        slots.entries,
        format!("number of work entries; then per entry its field count n and n name/value pairs; then {EFFECTS}"),
    ));
}

/// Checks the step's event marker: one already set means the event was
/// applied, by the step of the document it names.
pub(super) fn event_check(out: &mut String, s: &StepLayout) {
    let Some(s) = s.outbox else { return };
    let _ = write!(
        out,
        "\
local event = ARGV[{flag}] == '1'
if event then
  local applied = redis.call('GET', KEYS[{key}])
  if applied then return {{{EVENT_APPLIED}, applied}} end
end
",
        flag = s.marker_flag,
        key = s.marker_key,
    );
}

/// Walks the work entries once before any write: every count a whole
/// number within its bound, the shape filling ARGV exactly, and the stream
/// a stream (a read of it). A malformed call is refused before it writes.
pub(super) fn entries_check(out: &mut String, step: &StepLayout) {
    let Some(s) = step.outbox else {
        let _ = write!(
            out,
            "\
local function whole(text, max) return text and string.find(text, '^%d+$') and #text <= 4 and tonumber(text) <= max end
local last = {fixed}
",
            fixed = step.num_args,
        );
        effects_check(out, step);
        return;
    };
    let _ = write!(
        out,
        "\
local function whole(text, max) return text and string.find(text, '^%d+$') and #text <= 4 and tonumber(text) <= max end
if not whole(ARGV[{n}], {max_entries}) then return redis.error_reply('ERR microdcs step: malformed work entries') end
local count = tonumber(ARGV[{n}])
local last = {n}
for _ = 1, count do
  if not whole(ARGV[last + 1], {max_fields}) then return redis.error_reply('ERR microdcs step: malformed work entries') end
  last = last + 1 + 2 * tonumber(ARGV[last + 1])
end
if count > 0 then redis.call('XLEN', KEYS[{work}]) end
",
        n = s.entries,
        work = s.work_key,
        max_entries = super::MAX_WORK_ENTRIES,
        max_fields = super::MAX_ENTRY_FIELDS,
    );
    effects_check(out, step);
}

/// Walks the family effects before any write: the shape fills ARGV and
/// KEYS exactly, each operation is known, and each key is read with the
/// type its operation needs (a key of another type answers `{CORRUPT,
/// 'effect-type', key}`, with nothing written). A counter or hash field an
/// increment would read must hold a 64-bit integer (else `{CORRUPT,
/// 'effect', key}`) of at most the effect bound's length (else `{CORRUPT,
/// 'effect-range', key}`), so no increment can overflow or fail halfway
/// through the writes; a score must be a finite number to the server.
fn effects_check(out: &mut String, s: &StepLayout) {
    let _ = write!(
        out,
        "\
local function malformed() return redis.error_reply('ERR microdcs step: malformed effects') end
local function canonical(text) return text == '0' or string.find(text, '^%-?[1-9]%d*$') ~= nil end
local function int64(text)
  if not canonical(text) then return false end
  local digits = string.match(text, '%d+')
  return #digits < 19 or (#digits == 19 and digits <= '9223372036854775807')
end
local function typed(cmd, k, f)
  local r
  if f then r = redis.pcall(cmd, k, f) else r = redis.pcall(cmd, k) end
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, 10) == 'WRONGTYPE ' then return nil, {{{CORRUPT}, 'effect-type', k}} end
    return nil, r
  end
  return r
end
local function counted(cur, k)
  if not cur then return nil end
  if not int64(cur) then return {{{CORRUPT}, 'effect', k}} end
  if #cur > {int_len} then return {{{CORRUPT}, 'effect-range', k}} end
end
local fx_at = last + 1
if not whole(ARGV[fx_at], {max_effects}) then return malformed() end
local fx_count = tonumber(ARGV[fx_at])
if fx_at + 4 * fx_count ~= #ARGV or {keys} + fx_count ~= {keys_end} then return malformed() end
for i = 1, fx_count do
  local at, k = fx_at + 4 * (i - 1), KEYS[{keys} + i]
  local fx, a, b, ttl = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  if ttl ~= '' and not (string.find(ttl, '^[1-9]%d*$') and #ttl <= {ttl_len}) then return malformed() end
  local got, bad
  if fx == 'incr' then
    if not (canonical(a) and #a <= {int_len}) then return malformed() end
    got, bad = typed('GET', k)
    bad = bad or counted(got, k)
  elseif fx == 'hincr' then
    if not (canonical(b) and #b <= {int_len}) then return malformed() end
    got, bad = typed('HGET', k, a)
    bad = bad or counted(got, k)
  elseif fx == 'sadd' or fx == 'srem' then
    got, bad = typed('SCARD', k)
  elseif fx == 'zadd' then
    local x = string.find(b, '^%-?%d+%.?%d*$') and tonumber(b)
    if not x or x ~= x or x == math.huge or x == -math.huge then return malformed() end
    got, bad = typed('ZCARD', k)
  elseif fx == 'zrem' then
    got, bad = typed('ZCARD', k)
  else
    return malformed()
  end
  if bad then return bad end
end
",
        keys = s.num_keys,
        // The multi-valued index keys, when the type has any, come last.
        keys_end = s.put.tail.map_or_else(|| "#KEYS".to_owned(), |t| format!("tonumber(ARGV[{t}]) - 1")),
        max_effects = super::MAX_STEP_EFFECTS,
        int_len = super::MAX_EFFECT_INTEGER_LEN,
        ttl_len = super::MAX_LIFETIME_MS.to_string().len(),
        CORRUPT = super::ret::CORRUPT,
    );
}

/// Appends the work entries (each opens with the document id and its new
/// version, so a consumer knows which write made it) and sets the marker.
pub(super) fn writes(out: &mut String, step: &StepLayout) {
    if let Some(s) = step.outbox {
        let _ = write!(
            out,
            "\
local pos = {first}
for _ = 1, count do
  local n = tonumber(ARGV[pos])
  local entry = {{'job', id, 'v', newv_s}}
  for f = pos + 1, pos + 2 * n do entry[#entry + 1] = ARGV[f] end
  redis.call('XADD', KEYS[{work}], '*', unpack(entry))
  pos = pos + 1 + 2 * n
end
if event then redis.call('SET', KEYS[{key}], id, 'PX', ARGV[{ttl}]) end
",
            first = s.entries + 1,
            work = s.work_key,
            key = s.marker_key,
            ttl = s.marker_ttl,
        );
    }
    let _ = write!(
        out,
        "\
local fx_out = {{}}
for i = 1, fx_count do
  local at, k = fx_at + 4 * (i - 1), KEYS[{keys} + i]
  local fx, a, b, ttl = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  local r
  -- A Lua number holds integers exactly only below 2^53 (a counter goes
  -- to 2^63): past it an increment answers the stored text instead.
  if fx == 'incr' then
    r = redis.call('INCRBY', k, a)
    if r >= 9007199254740992 or r <= -9007199254740992 then r = redis.call('GET', k) end
  elseif fx == 'hincr' then
    r = redis.call('HINCRBY', k, a, b)
    if r >= 9007199254740992 or r <= -9007199254740992 then r = redis.call('HGET', k, a) end
  elseif fx == 'sadd' then r = redis.call('SADD', k, a)
  elseif fx == 'srem' then r = redis.call('SREM', k, a)
  elseif fx == 'zadd' then r = redis.call('ZADD', k, b, a)
  else r = redis.call('ZREM', k, a) end
  if ttl ~= '' then redis.call('PEXPIRE', k, ttl) end
  fx_out[i] = r
end
",
        keys = step.num_keys,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lua::layout::PutLayout;
    use crate::lua::put_script;
    use crate::lua::tests_spec::SPEC;

    #[test]
    fn the_step_checks_its_event_after_the_op_id_and_validates_before_writing() {
        use crate::spec::{DEFAULT_EVENT_TTL_MS, OutboxSpec};
        // Without an outbox: the put with family effects only.
        let (plain, l) = step_script(&SPEC);
        assert_eq!((l.outbox, l.num_keys, l.num_args), (None, l.put.num_keys, l.put.num_args));
        assert!(plain.starts_with("-- microdcs write script"), "{plain}");
        assert!(!plain.contains("'XLEN'") && !plain.contains("{8,") && !plain.contains("work entries"));
        assert!(plain.contains(&format!("local last = {}", l.num_args)));
        assert!(plain.contains("redis.call('INCRBY', k, a)"));
        let spec = DocumentSpec {
            outbox: Some(OutboxSpec {
                stream: "work:{scope}",
                events: Some("ev:{scope}:{id}"),
                event_ttl_ms: DEFAULT_EVENT_TTL_MS,
            }),
            ..SPEC
        };
        let (text, l) = step_script(&spec);
        assert_eq!(l.put, PutLayout::new(&spec), "a put's positions, unchanged");
        let o = l.outbox.expect("an outbox");
        assert_eq!((o.work_key, o.marker_key), (l.put.num_keys + 1, l.put.num_keys + 2));
        let op_lookup = text.find("return {7,").unwrap();
        let event = text.find("if applied then return {8, applied} end").unwrap();
        let expect = text.find("local expect = ARGV").unwrap();
        assert!(op_lookup < event && event < expect, "op id, then event, then version");
        let first_write = text.find("-- writes").unwrap();
        assert!(text.find("redis.call('XLEN', KEYS[").unwrap() < first_write, "the stream is read before any write");
        assert!(text.find("malformed work entries").unwrap() < first_write);
        let work =
            text.find(&format!("redis.call('XADD', KEYS[{}], '*'", o.work_key)).expect("work entries, no MAXLEN");
        assert!(work > first_write);
        assert_eq!(text.matches("'MAXLEN'").count(), 1, "only the change stream is capped");
        assert!(text.contains(&format!("redis.call('SET', KEYS[{}], id, 'PX', ARGV[{}])", o.marker_key, o.marker_ttl)));
        assert!(text.starts_with("-- microdcs step script"));
        assert!(text.contains("string.find(text, '^%d+$')"), "counts are whole numbers");
        // The put of the same type has none of it.
        let (put, _) = put_script(&spec);
        assert!(!put.contains("'XLEN'") && !put.contains("{8,"));
    }
}
