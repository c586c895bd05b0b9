//! Unit tests of the keyspace checks.
use super::{check_keyspace, keyspace_problem};
use crate::check::ConstMessage;
use crate::spec::{DocumentSpec, FamilySpec, KeyType, KeyspaceSpec, ListSpec};

use crate::fixtures::doc;

const SHARED: [FamilySpec<'static>; 3] = [
    FamilySpec::new("changes", "changes:{scope}", KeyType::Stream),
    FamilySpec::new("nudge", "nudge:{kind}", KeyType::Channel),
    FamilySpec::new("scopes", "scopes", KeyType::Set),
];

// Both on their own change stream and nudge channel: the defaults would
// belong to the keyspace implicitly, these must be declared.
const JOB_ORDER: DocumentSpec<'static> = DocumentSpec {
    changes: Some("events:{scope}"),
    nudge: "wake:{kind}",
    ..doc("JobOrder", "joborder", "joborder:{id}")
};
const OTHER: DocumentSpec<'static> = DocumentSpec {
    list: Some(ListSpec { key: "joborder:{scope}", score: None }),
    changes: Some("events:{scope}"),
    nudge: "wake:{kind}",
    ..doc("Other", "other", "other:{id}")
};
const DOCS: [DocumentSpec<'static>; 2] = [JOB_ORDER, OTHER];

#[test]
fn every_problem_is_listed_at_once() {
    // Neither the change stream nor the nudge channel is declared, and
    // two families overlap: one line each, a missing family naming every
    // type that uses it (one declaration fixes them all).
    const KS: KeyspaceSpec<'static> =
        KeyspaceSpec { name: "Plant", documents: &DOCS, families: &[SHARED[2]], shard: None };
    // Evaluated as `keyspace!` evaluates it: in a constant.
    const MSG: ConstMessage = keyspace_problem::<{ KS.family_count() }>(&KS);
    assert_eq!(
        MSG.as_str(),
        "keyspace `Plant` has 3 problems:\n\
         - key families overlap: document key `joborder:{id}` of `JobOrder` and list `joborder:{scope}` of `Other` can render the same key (a placeholder takes any one segment, so templates with as many segments meet wherever their literals agree); give one a segment of its own, e.g. `joborder:list:{scope}`\n\
         - document types `JobOrder` and `Other` use the stream `events:{scope}`, which keyspace `Plant` does not declare; add `changes: stream(\"events:{scope}\")`\n\
         - document types `JobOrder` and `Other` use the channel `wake:{kind}`, which keyspace `Plant` does not declare; add `nudge: channel(\"wake:{kind}\")`"
    );
    assert!(!MSG.is_cut());
    // The run-time check keeps one error per document, for its origin.
    assert_eq!(check_keyspace(&KS).len(), 5);
}

#[test]
fn three_users_of_a_missing_family_are_listed_with_commas() {
    const fn tenant(d: DocumentSpec<'static>) -> DocumentSpec<'static> {
        DocumentSpec { registry: "tenants", ..d }
    }
    const DOCS: [DocumentSpec<'static>; 3] =
        [tenant(doc("A", "a", "a:{id}")), tenant(doc("B", "b", "b:{id}")), tenant(doc("C", "c", "c:{id}"))];
    let ks = KeyspaceSpec { name: "K", documents: &DOCS, families: &SHARED[..2], shard: None };
    assert_eq!(
        keyspace_problem::<64>(&ks).as_str(),
        "document types `A`, `B` and `C` use the set `tenants`, which keyspace `K` does not declare; add `scopes: set(\"tenants\")`"
    );
}

#[test]
fn default_shared_families_belong_to_the_keyspace_implicitly() {
    // One line: documents on the default change stream, nudge channel
    // and registry need no declaration...
    const PLAIN: [DocumentSpec<'static>; 1] = [doc("Job", "job", "job:{id}")];
    let ks = KeyspaceSpec { name: "Jobs", documents: &PLAIN, families: &[], shard: None };
    assert!(keyspace_problem::<64>(&ks).is_empty());
    assert_eq!(check_keyspace(&ks), []);
    assert_eq!(ks.family_count(), 5, "the hash, the three shared families and the tombstones");
    // ...and the overlap check still covers them.
    const CLASH: [DocumentSpec<'static>; 2] = [doc("Job", "job", "job:{id}"), doc("Change", "change", "changes:{id}")];
    let ks = KeyspaceSpec { name: "Jobs", documents: &CLASH, families: &[], shard: None };
    assert!(
        keyspace_problem::<64>(&ks).as_str().contains("`changes:{id}` of `Change` and family `changes`"),
        "{}",
        keyspace_problem::<64>(&ks).as_str()
    );
    // Declared once, a shared family is not added twice.
    let ks = KeyspaceSpec { name: "Jobs", documents: &PLAIN, families: &SHARED, shard: None };
    assert_eq!(ks.family_count(), 5);
}

#[test]
fn two_types_of_one_kind_and_an_unused_shared_family_are_refused() {
    const TWINS: [DocumentSpec<'static>; 2] =
        [doc("Message", "message", "message:{id}"), doc("Note", "message", "note:{id}")];
    let ks = KeyspaceSpec { name: "Chat", documents: &TWINS, families: &[], shard: None };
    assert_eq!(
        keyspace_problem::<64>(&ks).as_str(),
        "document types `Message` and `Note` both have kind `message`: their change entries would mix and a \
         new document of one would start from the other's tombstone; give one of them another `kind = \"...\"`"
    );
    assert_eq!(check_keyspace(&ks).len(), 1);
    // A rename of the change stream that no type follows: every type
    // still writes `changes:{scope}`.
    const RENAME: [FamilySpec<'static>; 1] = [FamilySpec::new("changes", "events:{scope}", KeyType::Stream)];
    const ONE: [DocumentSpec<'static>; 1] = [doc("Job", "job", "job:{id}")];
    let ks = KeyspaceSpec { name: "Jobs", documents: &ONE, families: &RENAME, shard: None };
    assert_eq!(
        keyspace_problem::<64>(&ks).as_str(),
        "family `changes: stream(\"events:{scope}\")` is declared but no document type uses it (they use \
         `changes:{scope}` unless told otherwise): to move them, give each type `changes = \"events:{scope}\"`; \
         otherwise remove the declaration"
    );
    assert_eq!(check_keyspace(&ks).len(), 1);
    // Followed by the types, the same declaration is sound.
    const MOVED: [DocumentSpec<'static>; 1] =
        [DocumentSpec { changes: Some("events:{scope}"), ..doc("Job", "job", "job:{id}") }];
    let ks = KeyspaceSpec { name: "Jobs", documents: &MOVED, families: &RENAME, shard: None };
    assert!(keyspace_problem::<64>(&ks).is_empty(), "{}", keyspace_problem::<64>(&ks).as_str());
}

#[test]
fn a_refused_type_takes_no_part_in_the_keyspace_checks() {
    const DOCS: [DocumentSpec<'static>; 3] =
        [DocumentSpec::refused("Bad"), DocumentSpec::refused("Worse"), doc("Job", "job", "job:{id}")];
    let ks = KeyspaceSpec { name: "Jobs", documents: &DOCS, families: &[], shard: None };
    assert!(keyspace_problem::<64>(&ks).is_empty(), "{}", keyspace_problem::<64>(&ks).as_str());
    assert_eq!(check_keyspace(&ks), []);
}

#[test]
fn a_sound_keyspace_has_an_empty_message() {
    let ks = KeyspaceSpec {
        name: "Plant",
        documents: &[doc("JobOrder", "joborder", "joborder:{id}")],
        families: &SHARED,
        shard: None,
    };
    assert!(keyspace_problem::<64>(&ks).is_empty());
}

#[test]
fn a_placeholder_led_family_meets_literal_led_ones_among_many_literals() {
    // 26 families on 26 leading literals, so that most pairs sit in
    // different buckets and are never compared; a placeholder-led
    // family can still render a key of a literal-led one, and is found
    // whichever of the two comes first.
    let literals: Vec<String> = ('a'..='z').map(String::from).collect();
    let keys: Vec<String> = literals.iter().map(|l| format!("{l}:tenant:{l}")).collect();
    let names: Vec<String> = literals.iter().map(|l| format!("by_{l}")).collect();
    let mut families: Vec<FamilySpec<'_>> = SHARED.to_vec();
    families.extend(keys.iter().zip(&names).map(|(k, n)| FamilySpec::new(n, k, KeyType::String)));
    // A document type's list, before every declared family.
    const OWNER: [DocumentSpec<'static>; 1] = [DocumentSpec {
        list: Some(ListSpec { key: "{scope}:tenant:q", score: None }),
        ..doc("Owner", "owner", "owner:{id}")
    }];
    let ks = KeyspaceSpec { name: "K", documents: &OWNER, families: &families, shard: None };
    // The implicit tombstones (`tomb:{kind}:{id}`) are the other overlap.
    assert_eq!(
        keyspace_problem::<64>(&ks).as_str(),
        "keyspace `K` has 2 problems:\n- key families overlap: list `{scope}:tenant:q` of `Owner` and \
         family `by_q` (`q:tenant:q`) of keyspace `K` can render the same key (a placeholder takes any one segment, so templates with as many segments meet wherever their literals agree); give one a segment of its own, e.g. `q:by_q:tenant:q`\n- key families overlap: list \
         `{scope}:tenant:q` of `Owner` and family `tombstones` (`tomb:{kind}:{id}`) of keyspace `K` can \
         render the same key (a placeholder takes any one segment, so templates with as many segments meet \
         wherever their literals agree); give one a segment of its own, e.g. `tomb:tombstones:{kind}:{id}`"
    );
    assert_eq!(check_keyspace(&ks).len(), 2);
    // A declared family, after them.
    families.push(FamilySpec::new("per_owner", "{owner}:tenant:c", KeyType::String));
    let ks = KeyspaceSpec { name: "K", documents: &[], families: &families, shard: None };
    assert_eq!(
        keyspace_problem::<64>(&ks).as_str(),
        "key families overlap: family `by_c` (`c:tenant:c`) of keyspace `K` and family `per_owner` \
         (`{owner}:tenant:c`) of keyspace `K` can render the same key (a placeholder takes any one segment, so templates with as many segments meet wherever their literals agree); give one a segment of its own, e.g. `{owner}:per_owner:tenant:c`"
    );
    assert_eq!(check_keyspace(&ks).len(), 1);
}

#[test]
fn many_problems_are_cut_with_an_ellipsis() {
    // 40 declared families that all overlap each other: far more text
    // than the buffer holds.
    const NAMES: [&str; 40] = [""; 40];
    let families: Vec<FamilySpec<'_>> = NAMES.iter().map(|n| FamilySpec::new(n, "x:{a}", KeyType::String)).collect();
    let ks = KeyspaceSpec { name: "K", documents: &[], families: &families, shard: None };
    let msg = keyspace_problem::<64>(&ks);
    assert!(msg.is_cut());
    assert!(msg.as_str().starts_with("keyspace `K` has 780 problems:\n- key families overlap"), "{}", msg.as_str());
    assert!(msg.as_str().ends_with("..."));
    assert!(msg.as_str().len() <= ConstMessage::CAPACITY);
}
