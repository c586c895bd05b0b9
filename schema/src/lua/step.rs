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
--   {8, job}              the step's event was applied already, by the step of document `job`;
--                         nothing written (checked after the operation id: a retry of the
--                         step that set the marker reports {7, version})
";

/// The step script of `spec` (a type with an `outbox`), with its layout:
/// the put, plus the work entries appended to the outbox stream (no length
/// cap: work leaves the stream only once acknowledged) and the event marker
/// checked and set, all in the one script. `None` for a type without an
/// outbox.
///
/// The marker is checked after the op-history lookup, so a retry of a step
/// that applied (reply lost) reports its own write, not "event applied";
/// the stream and the marker are validated by reads before the first
/// write, like every other key.
pub fn step_script(spec: &DocumentSpec<'_>) -> Option<(String, StepLayout)> {
    spec.outbox?;
    let l = StepLayout::new(spec);
    Some((super::put::generate(spec, &l.put, Some(&l)), l))
}

pub(super) fn describe(spec: &DocumentSpec<'_>, s: &StepLayout, keys: &mut Vec<Described>, argv: &mut Vec<Described>) {
    let Some(o) = spec.outbox else { return };
    keys.push((s.work_key, format!("work stream `{}` (XADD, no MAXLEN)", o.stream)));
    keys.push((
        s.marker_key,
        format!("applied-event marker `{}` (KEYS[1] when the step carries no event)", o.events.unwrap_or("-")),
    ));
    argv.push((s.marker_flag, "`1` if the step carries an event, else `0`".into()));
    argv.push((s.marker_ttl, "the marker's lifetime in milliseconds".into()));
    argv.push((
        s.entries,
        "number of work entries; then per entry its field count n and n name/value pairs (to the end of ARGV)".into(),
    ));
}

/// Checks the step's event marker: one already set means the event was
/// applied, by the step of the document it names.
pub(super) fn event_check(out: &mut String, s: &StepLayout) {
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
pub(super) fn entries_check(out: &mut String, s: &StepLayout) {
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
if last ~= #ARGV then return redis.error_reply('ERR microdcs step: malformed work entries') end
if count > 0 then redis.call('XLEN', KEYS[{work}]) end
",
        n = s.entries,
        work = s.work_key,
        max_entries = super::MAX_WORK_ENTRIES,
        max_fields = super::MAX_ENTRY_FIELDS,
    );
}

/// Appends the work entries (each opens with the document id and its new
/// version, so a consumer knows which write made it) and sets the marker.
pub(super) fn writes(out: &mut String, s: &StepLayout) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lua::layout::PutLayout;
    use crate::lua::put_script;
    use crate::lua::tests_spec::SPEC;

    #[test]
    fn the_step_checks_its_event_after_the_op_id_and_validates_before_writing() {
        use crate::spec::{DEFAULT_EVENT_TTL_MS, OutboxSpec};
        assert!(step_script(&SPEC).is_none(), "no outbox, no step");
        let spec = DocumentSpec {
            outbox: Some(OutboxSpec {
                stream: "work:{scope}",
                events: Some("ev:{scope}:{id}"),
                event_ttl_ms: DEFAULT_EVENT_TTL_MS,
            }),
            ..SPEC
        };
        let (text, l) = step_script(&spec).unwrap();
        assert_eq!(l.put, PutLayout::new(&spec), "a put's positions, unchanged");
        assert_eq!((l.work_key, l.marker_key), (l.put.num_keys + 1, l.put.num_keys + 2));
        let op_lookup = text.find("return {7,").unwrap();
        let event = text.find("if applied then return {8, applied} end").unwrap();
        let expect = text.find("local expect = ARGV").unwrap();
        assert!(op_lookup < event && event < expect, "op id, then event, then version");
        let first_write = text.find("-- writes").unwrap();
        assert!(text.find("redis.call('XLEN', KEYS[").unwrap() < first_write, "the stream is read before any write");
        assert!(text.find("malformed work entries").unwrap() < first_write);
        let work =
            text.find(&format!("redis.call('XADD', KEYS[{}], '*'", l.work_key)).expect("work entries, no MAXLEN");
        assert!(work > first_write);
        assert_eq!(text.matches("'MAXLEN'").count(), 1, "only the change stream is capped");
        assert!(text.contains(&format!("redis.call('SET', KEYS[{}], id, 'PX', ARGV[{}])", l.marker_key, l.marker_ttl)));
        assert!(text.starts_with("-- microdcs step script"));
        assert!(text.contains("string.find(text, '^%d+$')"), "counts are whole numbers");
        // The put of the same type has none of it.
        let (put, _) = put_script(&spec);
        assert!(!put.contains("'XLEN'") && !put.contains("{8,"));
    }
}
