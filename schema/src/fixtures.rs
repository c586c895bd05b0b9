//! Specs the unit tests of several modules share: the plant job response
//! (a sorted-set list, a unique and a group index) and a bare document.

use crate::spec::{Binding, DocumentSpec, IndexSpec, ListSpec, Source};

const BY_ORDER: [Binding<'static>; 1] = [Binding { placeholder: "order", source: Source::Field("job_order_id") }];
const BY_STATE: [Binding<'static>; 2] = [
    Binding { placeholder: "scope", source: Source::Scope },
    Binding { placeholder: "state", source: Source::Method("normalized_state") },
];
const UNIQUE: [IndexSpec<'static>; 1] = [IndexSpec {
    name: "by_order",
    key: "jobresponse:byorder:{order}",
    bindings: &BY_ORDER,
    when: None,
    score: None,
    max: None,
    each: false,
}];
const GROUPS: [IndexSpec<'static>; 1] = [IndexSpec {
    name: "by_state",
    key: "jobresponse:bystate:{scope}:{state}",
    bindings: &BY_STATE,
    when: None,
    score: None,
    max: None,
    each: false,
}];

/// A document type with the derive's defaults and nothing else.
pub(crate) const fn doc(type_name: &'static str, kind: &'static str, key: &'static str) -> DocumentSpec<'static> {
    DocumentSpec::new(type_name, kind, key)
}

/// The job response: every index kind.
pub(crate) const JOB_RESPONSE: DocumentSpec<'static> = DocumentSpec {
    list: Some(ListSpec { key: "jobresponse:list:{scope}", score: Some(Source::Field("start_time")) }),
    unique: &UNIQUE,
    groups: &GROUPS,
    ..doc("JobResponse", "jobresponse", "jobresponse:{id}")
};
