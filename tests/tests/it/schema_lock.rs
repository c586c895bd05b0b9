//! The schema lock against derived types: release 1 of a keyspace writes
//! its lock, and the check of each later release fails on a change that
//! breaks stored data (a reordered `CompactJson` field, a moved document
//! key), naming the fix, refuses `BLESS=1` for it, and takes a safe change
//! (an appended field, a new index) with `BLESS=1`. No server.

use std::path::PathBuf;

use microdcs_valkey::Document;
use microdcs_valkey::lock::{Bless, ChangeClass, LockError, LockStatus, check_spec};
use serde::{Deserialize, Serialize};

mod release1 {
    use super::*;
    /// An order as release 1 stores it.
    #[derive(Debug, Clone, Serialize, Deserialize, Document)]
    #[microdcs(kind = "order", key = "order:{id}", list(key = "order:list:{scope}"))]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub customer: String,
        pub total: u64,
    }
    microdcs_valkey::keyspace! { pub Shop { documents: [Order] } }
}

mod reordered {
    use super::*;
    /// `total` moved before `customer`: by position, stored totals would
    /// read as customers.
    #[derive(Debug, Clone, Serialize, Deserialize, Document)]
    #[microdcs(kind = "order", key = "order:{id}", list(key = "order:list:{scope}"))]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub total: u64,
        pub customer: String,
    }
    microdcs_valkey::keyspace! { pub Shop { documents: [Order] } }
}

mod moved {
    use super::*;
    /// The document key changed: stored orders would not be found.
    #[derive(Debug, Clone, Serialize, Deserialize, Document)]
    #[microdcs(kind = "order", key = "shop:order:{id}", list(key = "order:list:{scope}"))]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub customer: String,
        pub total: u64,
    }
    microdcs_valkey::keyspace! { pub Shop { documents: [Order] } }
}

mod release2 {
    use super::*;
    /// Release 2 done right: a field appended with a default, an index added.
    #[derive(Debug, Clone, Serialize, Deserialize, Document)]
    #[microdcs(kind = "order", key = "order:{id}", list(key = "order:list:{scope}"))]
    #[microdcs(group(name = "by_customer", key = "order:bycustomer:{scope}:{customer}"))]
    pub struct Order {
        pub id: String,
        pub scope: String,
        pub customer: String,
        pub total: u64,
        #[serde(default)]
        pub gift_note: String,
    }
    microdcs_valkey::keyspace! { pub Shop { documents: [Order] } }
}

/// A lock path of this test's own, with release 1's lock written there.
fn release1_lock(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("microdcs-lock-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("microdcs.lock");
    let _ = std::fs::remove_file(&path);
    assert!(
        matches!(check_spec(&release1::Shop::SPEC, &path, Bless::No), Err(LockError::Missing { .. })),
        "a missing lock fails"
    );
    assert_eq!(check_spec(&release1::Shop::SPEC, &path, Bless::Safe).unwrap(), LockStatus::Written(Default::default()));
    assert_eq!(check_spec(&release1::Shop::SPEC, &path, Bless::No).unwrap(), LockStatus::Current);
    path
}

fn outdated(spec: &microdcs_valkey::schema::KeyspaceSpec<'_>, path: &std::path::Path, bless: Bless) -> String {
    match check_spec(spec, path, bless) {
        Err(e @ LockError::Outdated { .. }) => e.to_string(),
        other => panic!("expected an outdated lock, got {other:?}"),
    }
}

#[test]
fn the_derive_records_fields_in_declaration_order() {
    assert_eq!(release1::Order::SPEC.fields, ["id", "scope", "customer", "total"]);
    assert_eq!(reordered::Order::SPEC.fields, ["id", "scope", "total", "customer"]);
}

#[test]
fn a_reordered_compact_field_fails_the_check_naming_the_fix() {
    let path = release1_lock("reordered");
    let before = std::fs::read_to_string(&path).unwrap();
    let msg = outdated(&reordered::Shop::SPEC, &path, Bless::No);
    assert!(msg.contains("[breaking] kind order: fields reordered: position 2 held `customer`, now `total`"), "{msg}");
    assert!(msg.contains("append new fields last with `#[serde(default)]`, never reorder"), "{msg}");
    // BLESS=1 does not paper over it; the lock is left as it was.
    let msg = outdated(&reordered::Shop::SPEC, &path, Bless::Safe);
    assert!(msg.contains("BLESS=1 will not rewrite the lock"), "{msg}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    // After the fix (a copy migration), force records the new order.
    let LockStatus::Written(diff) = check_spec(&reordered::Shop::SPEC, &path, Bless::Force).unwrap() else {
        panic!("written")
    };
    assert_eq!(diff.worst(), Some(ChangeClass::Breaking));
    assert_eq!(check_spec(&reordered::Shop::SPEC, &path, Bless::No).unwrap(), LockStatus::Current);
}

#[test]
fn a_changed_template_fails_the_check_naming_the_copy_migration() {
    let path = release1_lock("moved");
    let msg = outdated(&moved::Shop::SPEC, &path, Bless::Safe);
    assert!(
        msg.contains("[breaking] kind order: document key template `order:{id}` is now `shop:order:{id}`"),
        "{msg}"
    );
    assert!(msg.contains("copy every document to the new keys (a copy migration"), "{msg}");
    // The list's layout names the document key: it needs a rebuild as well.
    assert!(msg.contains("[rebuild] kind order: layout of index `list` changed"), "{msg}");
}

#[test]
fn an_appended_field_and_a_new_index_ask_for_a_bless_and_take_it() {
    let path = release1_lock("release2");
    let msg = outdated(&release2::Shop::SPEC, &path, Bless::No);
    assert!(msg.contains("[safe] kind order: field `gift_note` appended"), "{msg}");
    assert!(msg.contains("[rebuild] kind order: new index `by_customer`"), "{msg}");
    assert!(msg.contains("rewrite the lock with BLESS=1"), "{msg}");
    assert!(!msg.contains("[breaking]"), "{msg}");
    let LockStatus::Written(diff) = check_spec(&release2::Shop::SPEC, &path, Bless::Safe).unwrap() else {
        panic!("written")
    };
    assert_eq!(diff.changes.len(), 2);
    assert_eq!(check_spec(&release2::Shop::SPEC, &path, Bless::No).unwrap(), LockStatus::Current);
}

#[test]
fn a_damaged_lock_is_refused_not_overwritten() {
    let path = release1_lock("damaged");
    std::fs::write(&path, "microdcs-lock-v1\nkeyspace Shop\nkind order\n  key order:{id}\n  field 1 customer\n")
        .unwrap();
    let err = check_spec(&release1::Shop::SPEC, &path, Bless::Safe).unwrap_err();
    assert!(matches!(err, LockError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("line 5: expected `field 0 NAME`"), "{err}");
    assert!(std::fs::read_to_string(&path).unwrap().contains("field 1 customer"), "left as it was");
}
