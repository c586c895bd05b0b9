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
