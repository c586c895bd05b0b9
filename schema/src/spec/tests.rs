use crate::fixtures::JOB_RESPONSE;

#[test]
fn an_index_reads_as_one_kind() {
    use super::{GroupKind, IndexSpec, Source};
    let base =
        IndexSpec { name: "ix", key: "t:{scope}", bindings: &[], when: None, score: None, max: None, each: false };
    assert_eq!(base.kind(), GroupKind::Set);
    let when = Source::Method("running");
    assert_eq!(IndexSpec { when: Some(when), ..base }.kind(), GroupKind::Member { when });
    let score = Source::Field("due");
    let sorted = IndexSpec { score: Some(score), max: Some(3), ..base }.kind();
    assert_eq!(sorted, GroupKind::Sorted { score, max: Some(3) });
    assert!(sorted.is_sorted() && sorted.has_marker());
    assert!(!GroupKind::Set.has_marker());
    let each = IndexSpec { each: true, ..base }.kind();
    assert!(each.is_each() && each.has_marker() && !each.is_sorted());
}

#[test]
fn layout_texts_are_an_explicit_versioned_encoding() {
    // Pinned: these texts are hashed into fingerprints stored on
    // servers; a change here flags every index as needing a rebuild.
    let texts: Vec<String> = JOB_RESPONSE.index_layouts().into_iter().map(|l| l.text).collect();
    assert_eq!(
        texts,
        [
            "layout-v1|list|jobresponse:list:{scope}|score=field:start_time|doc=jobresponse:{id}",
            "layout-v1|unique|jobresponse:byorder:{order}|order=field:job_order_id|when=-|score=-|max=-|doc=jobresponse:{id}",
            "layout-v1|group|jobresponse:bystate:{scope}:{state}|scope=scope,state=method:normalized_state|when=-|score=-|max=-|doc=jobresponse:{id}",
        ]
    );
}

#[test]
fn a_multi_valued_index_names_itself_in_its_layout_text() {
    // Pinned: a group that becomes multi-valued keeps its key and bindings,
    // so only this mark tells the fingerprint that its entries changed.
    use super::{Binding, IndexSpec, Source};
    const TAGS: [Binding<'static>; 2] = [
        Binding { placeholder: "scope", source: Source::Scope },
        Binding { placeholder: "tag", source: Source::Field("tags") },
    ];
    let ix = [IndexSpec {
        name: "by_tag",
        key: "t:bytag:{scope}:{tag}",
        bindings: &TAGS,
        when: None,
        score: None,
        max: None,
        each: true,
    }];
    let spec = super::DocumentSpec { groups: &ix, ..super::DocumentSpec::new("T", "t", "t:{id}") };
    let texts: Vec<String> = spec.index_layouts().into_iter().map(|l| l.text).collect();
    assert_eq!(
        texts,
        ["layout-v1|group|t:bytag:{scope}:{tag}|scope=scope,tag=field:tags|when=-|score=-|max=-|doc=t:{id}|each"]
    );
}
