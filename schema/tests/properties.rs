//! Property tests for the key encoding, the disjointness rule and the
//! keyspace check that applies it.
//!
//! Each property runs proptest's default number of cases (256); set
//! `PROPTEST_CASES` to run deeper, e.g. `PROPTEST_CASES=10000`.

use microdcs_schema::{
    Atom, FamilySpec, KeyPrefix, KeyTemplate, KeyType, KeyspaceSpec, MAX_VALUE_LEN, SchemaErrorKind, check_keyspace,
    keyspace_problem, templates_overlap,
};
use proptest::prelude::*;

/// Any text, with a bias towards the characters that matter for keys.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        proptest::collection::vec(
            prop_oneof![
                Just(':'),
                Just('|'),
                Just('%'),
                Just('*'),
                Just('?'),
                Just('['),
                Just(']'),
                Just('\\'),
                Just('{'),
                Just('}'),
                Just(' '),
                Just('\0'),
                Just('\n'),
                Just('é'),
                Just('→'),
                Just('a'),
                Just('1'),
                any::<char>()
            ],
            0..40
        )
        .prop_map(|cs| cs.into_iter().collect::<String>()),
    ]
    .prop_filter("valid values", |s| !s.is_empty() && s.len() <= MAX_VALUE_LEN)
}

/// Random template from a small alphabet so that overlaps are common.
fn template() -> impl Strategy<Value = String> {
    template_of(prop_oneof![Just("a"), Just("b"), Just("list"), Just("{}")].boxed())
}

/// The same with hash tags (`{#}`) too, which only meet hash tags.
fn template_with_tags() -> impl Strategy<Value = String> {
    template_of(prop_oneof![Just("a"), Just("b"), Just("list"), Just("{}"), Just("{#}")].boxed())
}

fn template_of(atom: BoxedStrategy<&'static str>) -> impl Strategy<Value = String> {
    let segment = proptest::collection::vec(atom, 1..3);
    proptest::collection::vec(segment, 1..4).prop_map(|segs| {
        let mut n = 0;
        segs.iter()
            .map(|seg| {
                seg.iter()
                    .map(|a| {
                        if *a == "{}" {
                            n += 1;
                            format!("{{p{n}}}")
                        } else if *a == "{#}" {
                            n += 1;
                            format!("{{#p{n}}}")
                        } else {
                            (*a).to_owned()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect::<Vec<_>>()
            .join(":")
    })
}

proptest! {
    #[test]
    fn render_parse_round_trip(a in value(), b in value(), c in value()) {
        let prefix = KeyPrefix::default();
        let t = KeyTemplate::parse("sfc:event:{scope}:{source}|{id}").unwrap();
        let key = t.render(&prefix, &[&a, &b, &c]).unwrap();
        prop_assert_eq!(t.parse_key(&prefix, &key), Some(vec![a, b, c]));
        // A key is its own exact SCAN pattern: no glob characters survive encoding.
        let rest = &key[prefix.as_str().len()..];
        let clean = !rest.contains(['*', '?', '[', ']', '\\', '{', '}', ' ']);
        prop_assert!(clean, "glob or brace in {}", key);
    }

    #[test]
    fn id_never_looks_like_a_list_key(id in value(), scope in value()) {
        let prefix = KeyPrefix::default();
        let doc = KeyTemplate::parse("joborder:{id}").unwrap();
        let list = KeyTemplate::parse("joborder:list:{scope}").unwrap();
        let dk = doc.render(&prefix, &[&id]).unwrap();
        let lk = list.render(&prefix, &[&scope]).unwrap();
        prop_assert_ne!(&dk, &lk);
        prop_assert_eq!(list.parse_key(&prefix, &dk), None);
        prop_assert_eq!(doc.parse_key(&prefix, &lk), None);
    }
}

proptest! {
    #[test]
    fn disjoint_families_never_collide(
        ta in template(),
        tb in template(),
        va in proptest::collection::vec(value(), 6),
        vb in proptest::collection::vec(value(), 6),
        reuse in any::<bool>(),
    ) {
        let prefix = KeyPrefix::default();
        let a = KeyTemplate::parse(&ta).unwrap();
        let b = KeyTemplate::parse(&tb).unwrap();
        let na = a.placeholders().count();
        let nb = b.placeholders().count();
        let va: Vec<&str> = va.iter().take(na).map(String::as_str).collect();
        // Sometimes feed `b` the literals of `a` as values, the likeliest way to collide.
        let lits = ["a", "b", "list", "a|b", "list:a"];
        let vb: Vec<&str> = if reuse {
            (0..nb).map(|i| lits[i % lits.len()]).collect()
        } else {
            vb.iter().take(nb).map(String::as_str).collect()
        };
        let ka = a.render(&prefix, &va).unwrap();
        let kb = b.render(&prefix, &vb).unwrap();
        if !templates_overlap(&ta, &tb) {
            prop_assert_ne!(&ka, &kb);
            prop_assert_eq!(b.parse_key(&prefix, &ka), None);
            prop_assert_eq!(a.parse_key(&prefix, &kb), None);
        }
        // The overlap rule is also complete: when it says "overlap", values
        // exist that make both templates render the same key. Build them
        // atom by atom: a placeholder facing a literal takes that literal,
        // two facing placeholders take one shared value.
        if templates_overlap(&ta, &tb) {
            let (wa, wb) = witness(&a, &b);
            let wa: Vec<&str> = wa.iter().map(String::as_str).collect();
            let wb: Vec<&str> = wb.iter().map(String::as_str).collect();
            let ka = a.render(&prefix, &wa).unwrap();
            let kb = b.render(&prefix, &wb).unwrap();
            prop_assert_eq!(&ka, &kb, "{} and {} said to overlap", ta, tb);
            prop_assert_eq!(b.parse_key(&prefix, &ka), Some(wb.iter().map(|s| (*s).to_owned()).collect()));
        }
    }
}

proptest! {
    /// The keyspace check skips pairs it knows cannot collide; it must still
    /// report exactly the pairs a comparison of every family with every other
    /// finds, in the same order (earlier family, then later one).
    #[test]
    fn keyspace_check_reports_every_overlapping_pair(
        families in proptest::collection::vec((template_with_tags(), 0..3_u8), 0..24),
    ) {
        let names: Vec<String> = (0..families.len()).map(|i| format!("f{i}")).collect();
        let types = [KeyType::String, KeyType::Set, KeyType::Channel];
        let specs: Vec<FamilySpec<'_>> = families
            .iter()
            .zip(&names)
            .map(|((key, t), name)| FamilySpec::new(name, key, types[usize::from(*t)]))
            .collect();
        let mut expected = Vec::new();
        for (i, a) in specs.iter().enumerate() {
            for (j, b) in specs.iter().enumerate().skip(i + 1) {
                let channels = (a.key_type == KeyType::Channel) == (b.key_type == KeyType::Channel);
                if channels && templates_overlap(a.key, b.key) {
                    expected.push((i, j));
                }
            }
        }
        let ks = KeyspaceSpec { name: "K", documents: &[], families: &specs, shard: None };
        let number = |text: &str| names.iter().position(|n| text.starts_with(&format!("family `{n}`")));
        let overlaps: Vec<(usize, usize, String)> = check_keyspace(&ks)
            .into_iter()
            .filter_map(|e| match e.kind {
                SchemaErrorKind::Overlap { first, second, fix } => Some((number(&first)?, number(&second)?, fix)),
                _ => None,
            })
            .collect();
        let found: Vec<(usize, usize)> = overlaps.iter().map(|(i, j, _)| (*i, *j)).collect();
        prop_assert_eq!(&found, &expected, "{:?}", families);
        // The rewrite each error suggests (of the later family) parses and
        // overlaps neither of the two.
        for (i, j, fix) in &overlaps {
            prop_assert!(KeyTemplate::parse(fix).is_ok(), "{}", fix);
            prop_assert!(!templates_overlap(fix, specs[*i].key) && !templates_overlap(fix, specs[*j].key), "{}", fix);
        }
        // The compile-time message counts the same problems.
        let msg = keyspace_problem::<24>(&ks);
        match expected.len() {
            0 => prop_assert!(msg.is_empty()),
            1 => prop_assert!(msg.as_str().starts_with("key families overlap"), "{}", msg.as_str()),
            n => {
                let head = format!("keyspace `K` has {n} problems:");
                prop_assert!(msg.as_str().starts_with(&head), "{}", msg.as_str());
            }
        }
    }
}

/// Placeholder values for `a` and `b` (same shape) that render one key.
fn witness(a: &KeyTemplate, b: &KeyTemplate) -> (Vec<String>, Vec<String>) {
    let (mut va, mut vb) = (Vec::new(), Vec::new());
    for (sa, sb) in a.segments().iter().zip(b.segments()) {
        for (xa, xb) in sa.iter().zip(sb) {
            match (xa, xb) {
                (Atom::Literal(_), Atom::Literal(_)) => {}
                (Atom::Literal(l), _) => vb.push(l.clone()),
                (_, Atom::Literal(l)) => va.push(l.clone()),
                _ => {
                    va.push("shared".to_owned());
                    vb.push("shared".to_owned());
                }
            }
        }
    }
    (va, vb)
}
