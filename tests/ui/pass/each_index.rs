//! A multi-valued index from a set field and from a method returning enum
//! values: the entry has a key per distinct value, in the order of the
//! encoded values, and the hash keeps them joined.

use std::collections::BTreeSet;

use microdcs_valkey::{Document, KeyPrefix, KeySegment};

#[derive(Debug, Clone, Copy, KeySegment)]
#[microdcs(rename_all = "snake_case")]
enum Label {
    Bug,
    NeedsReview,
}

#[derive(Document)]
#[microdcs(
    kind = "issue",
    each(key = "issue:bytag:{scope}:{tag}", tag = tags, name = "by_tag"),
    each(key = "issue:bylabel:{scope}:{label}", label = labels(), name = "by_label"),
    // The same placeholder name on a single-valued index: the multi-valued
    // one stores its values under its own name, so the two do not clash.
    group(key = "issue:bymain:{scope}:{tag}", tag = main_tag, name = "by_main")
)]
struct Issue {
    id: String,
    scope: String,
    tags: BTreeSet<String>,
    main_tag: String,
    flags: u8,
}

impl Issue {
    fn labels(&self) -> Vec<Label> {
        let mut out = Vec::new();
        if self.flags & 1 != 0 {
            out.push(Label::NeedsReview);
        }
        if self.flags & 2 != 0 {
            out.push(Label::Bug);
        }
        out
    }
}

fn main() {
    let p = KeyPrefix::new("p").unwrap();
    let issue = Issue { id: "i-1".into(), scope: "s".into(), tags: ["ui".into(), "a b".into()].into(), main_tag: "ui".into(), flags: 3 };
    let e = issue.index_entries(&p).unwrap();
    let tags = e.groups[0].as_ref().unwrap();
    assert_eq!(tags.keys().collect::<Vec<_>>(), ["p:issue:bytag:s:a%20b", "p:issue:bytag:s:ui"]);
    assert_eq!(tags.fields, [("by_tag", "a%20b|ui".to_owned())]);
    let labels = e.groups[1].as_ref().unwrap();
    assert_eq!(labels.keys().collect::<Vec<_>>(), ["p:issue:bylabel:s:bug", "p:issue:bylabel:s:needs_review"]);
    let none = Issue { tags: BTreeSet::new(), flags: 0, ..issue };
    let e = none.index_entries(&p).unwrap();
    assert!(e.groups[0].is_none() && e.groups[1].is_none());
    let _ = Issue::by_tag("s", "ui");
}
