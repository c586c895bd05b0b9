//! The plant keyspace renders exactly the key names of the reference key
//! table (the key names existing plant deployments use, copied verbatim
//! below), family by family, with prefix `microdcs`.

use microdcs_examples::plant::{JobOrder, JobResponse, Plant, SfcState, WorkMaster, key_table};
use microdcs_valkey::schema::check_keyspace;
use microdcs_valkey::{Document, KeyPrefix};

/// (reference template, Valkey type, expected key with the sample values
/// substituted in order). The templates are copied from the reference table verbatim.
const REFERENCE: &[(&str, &str, &str)] = &[
    ("ce:dedupe:{hash}", "string", "microdcs:ce:dedupe:0123456789abcdef0123456789abcdef"),
    ("lock:poststart:{configId}", "string", "microdcs:lock:poststart:cfg-1"),
    ("joborder:{id}", "hash", "microdcs:joborder:o-1"),
    ("joborder:list:{scope}", "zset", "microdcs:joborder:list:s1"),
    ("jobresponse:{id}", "hash", "microdcs:jobresponse:r-1"),
    ("jobresponse:list:{scope}", "zset", "microdcs:jobresponse:list:s1"),
    ("jobresponse:byorder:{orderId}", "string", "microdcs:jobresponse:byorder:o-1"),
    ("jobresponse:bystate:{scope}:{state}", "set", "microdcs:jobresponse:bystate:s1:Running_Held"),
    ("workmaster:{id}", "hash", "microdcs:workmaster:wm-1"),
    ("workmaster:list:{scope}", "set", "microdcs:workmaster:list:s1"),
    ("ref:{kind}:{scope}", "set", "microdcs:ref:equipment:s1"),
    ("jobacceptance:{scope}", "string", "microdcs:jobacceptance:s1"),
    ("scopes", "set", "microdcs:scopes"),
    ("changes:{scope}", "stream", "microdcs:changes:s1"),
    ("pubseq:{scope}", "string", "microdcs:pubseq:s1"),
    ("publisher:cursors", "hash", "microdcs:publisher:cursors"),
    ("sfc:state:{jobId}", "hash", "microdcs:sfc:state:j-1"),
    ("sfc:work:{scope}", "stream", "microdcs:sfc:work:s1"),
    ("sfc:active:{scope}", "set", "microdcs:sfc:active:s1"),
    ("sfc:due:{scope}", "zset", "microdcs:sfc:due:s1"),
    ("sfc:heartbeat", "string", "microdcs:sfc:heartbeat"),
    ("sfc:waits:{scope}:{typeId}", "zset", "microdcs:sfc:waits:s1:t-1"),
    ("sfc:event:{scope}:{source}|{id}", "string", "microdcs:sfc:event:s1:urn%3Aline-1|e-1"),
    ("nudge:{kind}", "channel", "microdcs:nudge:jobresponse"),
];

/// Placeholder names differ between the reference table (`{configId}`) and Rust
/// (`{config_id}`); the shape must not.
fn shape(t: &str) -> String {
    let mut out = String::new();
    let mut in_ph = false;
    for c in t.chars() {
        match c {
            '{' => {
                in_ph = true;
                out.push_str("{}");
            }
            '}' => in_ph = false,
            _ if in_ph => {}
            _ => out.push(c),
        }
    }
    out
}

#[test]
fn every_reference_family_renders_the_reference_key() {
    let rows = key_table(&KeyPrefix::default()).unwrap();
    // Families we add to the reference table, each for a stated reason.
    const ADDED: &[(&str, &str)] = &[
        ("schema:fingerprints", "microdcs:schema:fingerprints"),
        // The live writers and index states of a kind (schema evolution).
        ("schema:writers:{#kind}", "microdcs:schema:writers:{jobresponse}"),
        ("schema:indexes:{#kind}", "microdcs:schema:indexes:{jobresponse}"),
        ("tomb:{kind}:{id}", "microdcs:tomb:jobresponse:r-1"),
        ("sfc:recipe:{hash}", "microdcs:sfc:recipe:e3b0c442"),
    ];
    assert_eq!(
        rows.len(),
        REFERENCE.len() + ADDED.len(),
        "one family per row of the reference table, plus our additions"
    );
    for (template, key) in ADDED {
        let row = rows.iter().find(|r| r.template == *template).expect("added family present");
        assert_eq!(row.key, *key);
    }
    for (template, ty, expected) in REFERENCE {
        let row = rows
            .iter()
            .find(|r| shape(r.template) == shape(template))
            .unwrap_or_else(|| panic!("no family for reference row `{template}`"));
        assert_eq!(row.key_type, *ty, "type of `{template}` ({})", row.family);
        assert_eq!(row.key, *expected, "key of `{template}` ({})", row.family);
    }
}

#[test]
fn plant_keyspace_checks_clean() {
    assert_eq!(check_keyspace(&Plant::SPEC), []);
}

/// The plant keyspace declares the runtime's own families with exactly the
/// templates the services use, so its overlap check covers their keys.
#[test]
fn plant_declares_the_runtime_families_as_the_runtime_uses_them() {
    use microdcs_valkey::schema::builtin;
    for b in
        [builtin::CHANGES, builtin::NUDGE, builtin::SCOPES, builtin::DEDUPE, builtin::START_LOCK, builtin::FINGERPRINTS]
    {
        let declared = Plant::SPEC.families.iter().find(|f| f.key == b.key);
        assert_eq!(
            declared.map(|f| f.key_type),
            Some(b.key_type),
            "{} (`{}`) is declared in the plant keyspace",
            b.name,
            b.key
        );
    }
}

#[test]
fn id_that_looks_like_a_list_stays_unambiguous() {
    let p = KeyPrefix::default();
    let doc = JobOrder::key(&p, "list:s1").unwrap();
    let list = JobOrder::list_key(&p, "s1").unwrap();
    assert_eq!(doc, "microdcs:joborder:list%3As1");
    assert_ne!(doc, list);
    let doc_t = microdcs_valkey::schema::KeyTemplate::parse(JobOrder::SPEC.key).unwrap();
    let list_t = microdcs_valkey::schema::KeyTemplate::parse(JobOrder::SPEC.list.unwrap().key).unwrap();
    assert_eq!(doc_t.parse_key(&p, &doc).unwrap(), ["list:s1"]);
    assert_eq!(list_t.parse_key(&p, &doc), None);
    assert_eq!(doc_t.parse_key(&p, &list), None);
}

#[test]
fn index_entries_follow_the_fields() {
    let p = KeyPrefix::default();
    let mut r = JobResponse {
        id: "r-1".into(),
        scope: "s1".into(),
        job_order_id: "o-1".into(),
        start_time: 1_700_000_000_000,
        state: vec!["Running".into(), "Held".into()],
        data: String::new(),
    };
    let e = r.index_entries(&p).unwrap();
    assert_eq!(e.key, "microdcs:jobresponse:r-1");
    assert_eq!(e.id, "r-1");
    assert_eq!(e.scope, "s1");
    let list = e.list.unwrap();
    assert_eq!(list.key, "microdcs:jobresponse:list:s1");
    assert_eq!(list.score, Some(1_700_000_000_000.0));
    let u = e.unique[0].as_ref().unwrap();
    assert_eq!(u.key, "microdcs:jobresponse:byorder:o-1");
    assert_eq!(u.fields, [("order", "o-1".to_owned())]);
    let g = e.groups[0].as_ref().unwrap();
    assert_eq!(g.key, "microdcs:jobresponse:bystate:s1:Running_Held");
    assert_eq!(g.fields, [("state", "Running_Held".to_owned())]);

    // Empty normalized state: not in the by-state index (no reported state, no state group).
    r.state.clear();
    let e = r.index_entries(&p).unwrap();
    assert_eq!(e.groups, [None]);
    assert!(e.unique[0].is_some());

    // An empty id is a typed error, not a key.
    r.id.clear();
    let err = r.index_entries(&p).unwrap_err();
    assert!(err.to_string().contains("{id}"), "{err}");
}

#[test]
fn marked_id_field_and_plain_set_list() {
    let p = KeyPrefix::default();
    let s = SfcState {
        job_id: "j-1".into(),
        scope: "s1".into(),
        step: "start".into(),
        deadline: None,
        running: false,
        wait_type: None,
        wait_start: None,
    };
    assert_eq!(s.id(), "j-1");
    let e = s.index_entries(&p).unwrap();
    assert_eq!(e.key, "microdcs:sfc:state:j-1");
    assert_eq!(e.list, None);
    let w = WorkMaster { id: "wm-1".into(), scope: "s1".into(), name: "Mix".into() };
    let e = w.index_entries(&p).unwrap();
    assert_eq!(e.list.unwrap().score, None);
    assert_eq!(SfcState::SPEC.id_field, "job_id");
}
