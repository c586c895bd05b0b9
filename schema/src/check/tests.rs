use super::*;
use crate::spec::{Binding, FamilySpec, IndexSpec, ListSpec};
use crate::spec::{DocumentSpec, KeyType, KeyspaceSpec, Source};

use crate::fixtures::{JOB_RESPONSE, doc};

const SHARED: [FamilySpec<'static>; 3] = [
    FamilySpec::new("changes", "changes:{scope}", KeyType::Stream),
    FamilySpec::new("nudge", "nudge:{kind}", KeyType::Channel),
    FamilySpec::new("scopes", "scopes", KeyType::Set),
];

#[test]
fn job_response_is_valid() {
    assert_eq!(check_document(&JOB_RESPONSE), []);
    let ks = KeyspaceSpec { name: "Plant", documents: &[JOB_RESPONSE], families: &SHARED, shard: None };
    assert_eq!(check_keyspace(&ks), []);
    assert!(keyspace_problem::<64>(&ks).is_empty());
}

#[test]
fn document_rules() {
    let kinds = |d: &DocumentSpec<'_>| check_document(d).into_iter().map(|e| e.kind).collect::<Vec<_>>();
    assert_eq!(
        kinds(&doc("A", "a", "a:{x}")),
        [SchemaErrorKind::KeyWithoutId, SchemaErrorKind::KeyExtraPlaceholder("x".into())]
    );
    assert_eq!(kinds(&doc("A", "Bad Kind", "a:{id}")), [SchemaErrorKind::BadKind("Bad Kind".into())]);
    let list = DocumentSpec { list: Some(ListSpec { key: "a:list:{id}", score: None }), ..doc("A", "a", "a:{id}") };
    assert_eq!(
        kinds(&list),
        [SchemaErrorKind::ListPlaceholder(None), SchemaErrorKind::ListPlaceholder(Some("id".into()))]
    );
    // A list that overlaps the document key.
    let list = DocumentSpec { list: Some(ListSpec { key: "a:{scope}", score: None }), ..doc("A", "a", "a:{id}") };
    let errs = check_document(&list);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].origin.attr, Attr::List);
    assert!(errs[0].to_string().contains("document key `a:{id}` of `A`"), "{}", errs[0]);
    assert!(errs[0].to_string().contains("list `a:{scope}` of `A`"), "{}", errs[0]);
}

#[test]
fn index_rules() {
    const UNBOUND: [IndexSpec<'static>; 1] =
        [IndexSpec { name: "by_x", key: "a:byx:{x}", bindings: &[], when: None, score: None, max: None, each: false }];
    const RESERVED: [IndexSpec<'static>; 1] = [IndexSpec {
        name: "by_v",
        key: "a:byv:{v}",
        bindings: &[Binding { placeholder: "v", source: Source::Field("v") }],
        when: None,
        score: None,
        max: None,
        each: false,
    }];
    const CLASH: [IndexSpec<'static>; 2] = [
        IndexSpec {
            name: "one",
            key: "a:one:{x}",
            bindings: &[Binding { placeholder: "x", source: Source::Field("f") }],
            when: None,
            score: None,
            max: None,
            each: false,
        },
        IndexSpec {
            name: "two",
            key: "a:two:{x}",
            bindings: &[Binding { placeholder: "x", source: Source::Field("g") }],
            when: None,
            score: None,
            max: None,
            each: false,
        },
    ];
    let d = DocumentSpec { unique: &UNBOUND, ..doc("A", "a", "a:{id}") };
    assert_eq!(check_document(&d)[0].kind, SchemaErrorKind::Unbound("x".into()));
    let d = DocumentSpec { unique: &RESERVED, ..doc("A", "a", "a:{id}") };
    assert_eq!(check_document(&d)[0].kind, SchemaErrorKind::ReservedField("v".into()));
    let d = DocumentSpec { groups: &CLASH, ..doc("A", "a", "a:{id}") };
    let e = check_document(&d);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].origin.attr, Attr::Group(1));
}

#[test]
fn keyspace_overlap_names_both() {
    const A: DocumentSpec<'static> = doc("JobOrder", "joborder", "joborder:{id}");
    const B: DocumentSpec<'static> = DocumentSpec {
        list: Some(ListSpec { key: "joborder:{scope}", score: None }),
        ..doc("Other", "other", "other:{id}")
    };
    let ks = KeyspaceSpec { name: "Plant", documents: &[A, B], families: &SHARED, shard: None };
    let errs = check_keyspace(&ks);
    assert_eq!(errs.len(), 1, "{errs:?}");
    let msg = keyspace_problem::<64>(&ks);
    assert_eq!(
        msg.as_str(),
        "key families overlap: document key `joborder:{id}` of `JobOrder` and list `joborder:{scope}` of `Other` can render the same key (a placeholder takes any one segment, so templates with as many segments meet wherever their literals agree); give one a segment of its own, e.g. `joborder:list:{scope}`"
    );
    assert_eq!(
        errs[0].to_string(),
        "key families overlap: document key `joborder:{id}` of `JobOrder` and list `joborder:{scope}` of `Other` can render the same key (a placeholder takes any one segment, so templates with as many segments meet wherever their literals agree); give one a segment of its own, e.g. `joborder:list:{scope}`"
    );
}

#[test]
fn keyspace_requires_shared_families() {
    const A: DocumentSpec<'static> =
        DocumentSpec { changes: Some("orders:changes:{scope}"), ..doc("JobOrder", "joborder", "joborder:{id}") };
    let ks = KeyspaceSpec { name: "Plant", documents: &[A], families: &SHARED[1..], shard: None };
    let errs = check_keyspace(&ks);
    assert!(matches!(&errs[0].kind, SchemaErrorKind::Undeclared { key_type: KeyType::Stream, .. }));
    assert_eq!(
        keyspace_problem::<64>(&ks).as_str(),
        "document type `JobOrder` uses the stream `orders:changes:{scope}`, which keyspace `Plant` does not declare; add `changes: stream(\"orders:changes:{scope}\")`"
    );
}

#[test]
fn const_message_truncates() {
    let long = "x".repeat(ConstMessage::CAPACITY);
    let m = ConstMessage::new().push("a").push(&long).push("b");
    assert_eq!(m.as_str(), "a...");
    assert!(m.is_cut());
}

#[test]
fn an_outbox_is_checked() {
    use crate::spec::{DEFAULT_EVENT_TTL_MS, OutboxSpec};
    let base = doc("Job", "job", "job:{id}");
    let with =
        |stream, events, ttl| DocumentSpec { outbox: Some(OutboxSpec { stream, events, event_ttl_ms: ttl }), ..base };
    assert!(check_document(&with("work:{scope}", Some("ev:{scope}:{source}|{id}"), DEFAULT_EVENT_TTL_MS)).is_empty());
    let kinds = |d| check_document(&d).into_iter().map(|e| e.kind).collect::<Vec<_>>();
    assert!(
        matches!(kinds(with("changes:{scope}", None, 1))[..], [SchemaErrorKind::OutboxMisuse(_)]),
        "the change stream"
    );
    assert!(matches!(kinds(with("work:{scope}", None, u64::MAX))[..], [SchemaErrorKind::OutboxMisuse(_)]), "too long");
    assert!(matches!(kinds(with("work:{scope}", None, 0))[..], [SchemaErrorKind::ZeroTtl]));
    assert!(matches!(kinds(with("work", None, 1))[..], [SchemaErrorKind::SharedTemplate { .. }]));
    assert!(matches!(
        kinds(with("work:{scope}", Some("ev:{scope}"), 1))[..],
        [SchemaErrorKind::EventPlaceholder(None)]
    ));
    let unscoped =
        DocumentSpec { unscoped: true, list: Some(ListSpec { key: "job:list:{scope}", score: None }), ..base };
    assert!(matches!(kinds(unscoped)[..], [SchemaErrorKind::Unscoped(_)]));
}
