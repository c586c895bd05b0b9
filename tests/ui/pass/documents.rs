//! Every attribute form: defaults, marked fields, method bindings, explicit
//! names, a keyword placeholder, optional index values, numeric scores.
use std::borrow::Cow;

use microdcs_valkey::{Document, KeyPrefix, keyspace};

#[derive(Document)]
struct Plain {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(
    kind = "item",
    key = "item:{id}",
    list(key = "item:list:{scope}", score = rank()),
    unique(name = "by_code", key = "item:bycode:{code}", code = external_code),
    group(key = "item:bytype:{scope}:{type}", type = kind_text()),
    group(key = "item:byowner:{owner}"),
)]
struct Item {
    #[microdcs(id)]
    item_id: u64,
    #[microdcs(scope)]
    area: Cow<'static, str>,
    external_code: Option<String>,
    owner: &'static str,
}

impl Item {
    fn rank(&self) -> f32 {
        1.5
    }
    fn kind_text(&self) -> String {
        "tool".to_owned()
    }
}

keyspace! {
    /// Documented keyspace.
    pub(crate) Store {
        documents: [Plain, Item],
        scopes: set("scopes"),
        changes: stream("changes:{scope}"),
        nudge: channel("nudge:{kind}"),
        lease: string("lease:{prefix}|{type}"),
        tagged: string("lock:{#name}:fence"),
    }
}

fn main() {
    let p = KeyPrefix::default();
    assert_eq!(Plain::key(&p, "a").unwrap(), "microdcs:plain:a");
    assert_eq!(Item::key(&p, &7_u64).unwrap(), "microdcs:item:7");
    assert_eq!(Item::by_type_key(&p, "s", "tool").unwrap(), "microdcs:item:bytype:s:tool");
    assert_eq!(Store::lease_key(&p, "x", "y").unwrap(), "microdcs:lease:x|y");
    assert_eq!(Store::tagged_key(&p, "a:b").unwrap(), "microdcs:lock:{a%3Ab}:fence");
    let item = Item { item_id: 7, area: Cow::Borrowed("s"), external_code: None, owner: "me" };
    let e = item.index_entries(&p).unwrap();
    assert_eq!(e.unique, [None]);
    assert_eq!(e.list.unwrap().score, Some(1.5));
    assert_eq!(e.groups[1].as_ref().unwrap().key, "microdcs:item:byowner:me");
    assert_eq!(Store::SPEC.documents.len(), 2);
}
