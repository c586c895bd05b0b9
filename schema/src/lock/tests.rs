use super::{ChangeClass, Lock, LockDiff, LockParseError};
use crate::family::{FamilyKind, FamilySpec, KeyType};
use crate::fixtures::JOB_RESPONSE;
use crate::spec::{DocumentSpec, IndexSpec, KeyspaceSpec};

const FIELDS: [&str; 5] = ["id", "scope", "job_order_id", "state", "start_time"];

fn response() -> DocumentSpec<'static> {
    DocumentSpec { fields: &FIELDS, ..JOB_RESPONSE }
}

const SEEN: FamilySpec<'static> = FamilySpec {
    name: "seen",
    key: "seen:{pod}",
    key_type: KeyType::Hash,
    kind: FamilyKind::Hash,
    ttl_ms: Some(60_000),
};

fn lock_of<'a>(docs: &[DocumentSpec<'a>], families: &[FamilySpec<'a>]) -> Lock {
    Lock::of(&KeyspaceSpec { name: "Plant", documents: docs, families, shard: None })
}

/// The committed form of `docs`, read back as a check reads it.
fn committed(docs: &[DocumentSpec<'_>]) -> Lock {
    Lock::parse(&lock_of(docs, &[SEEN]).render()).expect("a rendered lock parses")
}

fn diff(old: &[DocumentSpec<'_>], new: &[DocumentSpec<'_>]) -> LockDiff {
    LockDiff::between(&committed(old), &lock_of(new, &[SEEN]))
}

/// The text is a persisted format: pinned, so a change of it is a decision.
#[test]
fn the_rendered_lock_is_pinned_and_reads_back() {
    let lock = lock_of(&[response()], &[SEEN]);
    let text = lock.render();
    assert_eq!(
        text,
        "microdcs-lock-v1
# The schema lock of keyspace `Plant`: what stored data depends on. Checked by a test;
# after an intended change rewrite it with BLESS=1 (see microdcs_valkey::lock).
keyspace Plant
kind jobresponse
  type JobResponse
  schema 1
  key jobresponse:{id}
  field 0 id
  field 1 scope
  field 2 job_order_id
  field 3 state
  field 4 start_time
  ttl -
  changes changes:{scope}
  nudge nudge:{kind}
  registry scopes
  outbox -
  index list layout-v1|list|jobresponse:list:{scope}|score=field:start_time|doc=jobresponse:{id}
  index by_order layout-v1|unique|jobresponse:byorder:{order}|order=field:job_order_id|when=-|score=-|max=-|doc=jobresponse:{id}
  index by_state layout-v1|group|jobresponse:bystate:{scope}:{state}|scope=scope,state=method:normalized_state|when=-|score=-|max=-|doc=jobresponse:{id}
family seen hash seen:{pod} 60000
"
    );
    assert_eq!(Lock::parse(&text), Ok(lock.clone()));
    assert!(LockDiff::between(&lock, &lock).is_empty());
    assert_eq!(LockDiff::between(&lock, &lock).worst(), None);
}

#[test]
fn a_reordered_compact_field_is_breaking_and_names_the_fix() {
    let reordered = DocumentSpec { fields: &["id", "scope", "state", "job_order_id", "start_time"], ..response() };
    let d = diff(&[response()], &[reordered]);
    assert_eq!(d.worst(), Some(ChangeClass::Breaking), "{}", d.report());
    assert_eq!(d.changes.len(), 1, "{}", d.report());
    assert_eq!(d.changes[0].what, "fields reordered: position 2 held `job_order_id`, now `state`");
    let report = d.report();
    assert!(report.contains("append new fields last with `#[serde(default)]`, never reorder"), "{report}");
    assert!(report.contains("a copy migration"), "{report}");
    assert!(report.contains("BLESS=1 will not rewrite the lock"), "{report}");
}

#[test]
fn a_removed_or_inserted_field_is_breaking() {
    let removed = DocumentSpec { fields: &["id", "scope", "job_order_id", "start_time"], ..response() };
    let d = diff(&[response()], &[removed]);
    assert_eq!((d.worst(), d.changes[0].what.as_str()), (Some(ChangeClass::Breaking), "field `state` removed"));
    let inserted =
        DocumentSpec { fields: &["id", "scope", "note", "job_order_id", "state", "start_time"], ..response() };
    let d = diff(&[response()], &[inserted]);
    assert_eq!(
        (d.worst(), d.changes[0].what.as_str()),
        (Some(ChangeClass::Breaking), "field `note` inserted at position 2, before `job_order_id`")
    );
}

#[test]
fn an_appended_field_is_safe() {
    let appended =
        DocumentSpec { fields: &["id", "scope", "job_order_id", "state", "start_time", "note"], ..response() };
    let d = diff(&[response()], &[appended]);
    assert_eq!(d.worst(), Some(ChangeClass::Safe), "{}", d.report());
    assert_eq!(d.changes[0].what, "field `note` appended");
    assert!(d.report().contains("rewrite the lock with BLESS=1"), "{}", d.report());
}

#[test]
fn a_changed_document_template_is_breaking_and_names_the_copy_migration() {
    let moved = DocumentSpec { key: "jobresp:{id}", ..response() };
    let d = diff(&[response()], &[moved]);
    let breaking: Vec<_> = d.changes.iter().filter(|c| c.class == ChangeClass::Breaking).collect();
    assert_eq!(breaking.len(), 1, "{}", d.report());
    assert_eq!(breaking[0].what, "document key template `jobresponse:{id}` is now `jobresp:{id}`");
    assert!(breaking[0].fix.contains("copy every document to the new keys (a copy migration"), "{}", breaking[0].fix);
    // Every index's layout names the document key: each needs a rebuild too.
    assert_eq!(d.changes.iter().filter(|c| c.class == ChangeClass::Rebuild).count(), 3, "{}", d.report());
}

#[test]
fn a_changed_family_template_is_breaking() {
    let moved = FamilySpec { key: "seen:v2:{pod}", ..SEEN };
    let d = LockDiff::between(&committed(&[response()]), &lock_of(&[response()], &[moved]));
    assert_eq!(d.worst(), Some(ChangeClass::Breaking));
    assert_eq!(d.changes[0].subject, "family seen");
    assert!(d.changes[0].fix.contains("copy the keys to the new template (a copy migration)"));
}

#[test]
fn a_changed_or_new_index_needs_a_rebuild_and_says_so() {
    let wider = [IndexSpec { key: "jobresponse:bystate2:{scope}:{state}", ..response().groups[0] }];
    let changed = DocumentSpec { groups: &wider, ..response() };
    let d = diff(&[response()], &[changed]);
    assert_eq!((d.worst(), d.changes.len()), (Some(ChangeClass::Rebuild), 1), "{}", d.report());
    assert!(d.changes[0].what.starts_with("layout of index `by_state` changed"));
    assert!(d.changes[0].fix.contains("a new, building index"), "{}", d.changes[0].fix);
    assert!(d.changes[0].fix.contains("rebuild --kind jobresponse --index by_state"), "{}", d.changes[0].fix);

    let without = DocumentSpec { groups: &[], ..response() };
    let d = diff(&[without], &[response()]);
    assert_eq!((d.worst(), d.changes[0].what.as_str()), (Some(ChangeClass::Rebuild), "new index `by_state`"));
    assert!(d.report().contains("rewrite the lock with BLESS=1"));
    // And dropping it again leaves only keys behind.
    let d = diff(&[response()], &[without]);
    assert_eq!((d.worst(), d.changes[0].what.as_str()), (Some(ChangeClass::Safe), "index `by_state` dropped"));
}

#[test]
fn a_new_type_is_safe_and_a_removed_one_breaking() {
    let other = DocumentSpec { fields: &["id", "scope"], ..DocumentSpec::new("WorkMaster", "workmaster", "wm:{id}") };
    let d = diff(&[response()], &[response(), other]);
    assert_eq!((d.worst(), d.changes[0].what.as_str()), (Some(ChangeClass::Safe), "new type `WorkMaster`"));
    let d = diff(&[response(), other], &[response()]);
    assert_eq!(d.worst(), Some(ChangeClass::Breaking));
    assert!(d.changes[0].fix.contains("stay under `wm:{id}`"), "{}", d.changes[0].fix);
}

#[test]
fn a_changed_lifetime_is_safe() {
    let d = diff(&[response()], &[DocumentSpec { ttl_ms: Some(1000), ..response() }]);
    assert_eq!((d.worst(), d.changes[0].what.as_str()), (Some(ChangeClass::Safe), "lifetime - ms is now 1000 ms"));
}

#[test]
fn a_schema_version_may_rise_never_fall() {
    let mut old = committed(&[response()]);
    old.kinds[0].schema = Some(2);
    let mut new = lock_of(&[response()], &[SEEN]);
    new.kinds[0].schema = Some(3);
    assert_eq!(LockDiff::between(&old, &new).worst(), Some(ChangeClass::Safe));
    new.kinds[0].schema = Some(1);
    assert_eq!(LockDiff::between(&old, &new).worst(), Some(ChangeClass::Breaking));
    // The line reads back.
    assert_eq!(Lock::parse(&new.render()).map(|l| l.kinds[0].schema), Ok(Some(1)));
}

#[test]
fn a_text_of_another_shape_is_refused_with_its_line() {
    let good = lock_of(&[response()], &[SEEN]).render();
    let err = |text: &str| Lock::parse(text).expect_err(text);
    assert_eq!(err("microdcs-lock-v2\n").line, 1);
    assert_eq!(err("").to_string(), "schema lock: empty: expected `microdcs-lock-v1`");
    let skipped = good.replace("  field 1 scope\n", "");
    assert_eq!(
        err(&skipped),
        LockParseError { line: 10, why: "expected `field 1 NAME` (positions in order)".into() },
        "a missing position is no silent shift"
    );
    assert_eq!(err(&good.replace("  ttl -", "  ttl soon")).why, "`soon` is no lifetime in milliseconds (or `-`)");
    assert_eq!(err(&good.replace("  nudge", "  nudges")).why, "unexpected `nudges` in kind `jobresponse`");
    assert_eq!(err(&good.replace("  key jobresponse:{id}\n", "")).why, "kind `jobresponse` has no `key`");
}
