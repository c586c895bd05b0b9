//! Which index entry a document's stored hash fields call for: the one rule
//! the write path (the entry a write replaces), maintenance and the
//! inspector share, so they cannot disagree about a document.
//!
//! A document hash keeps, for each index, the values its key placeholders
//! took when it was written (a field named after the placeholder), and for a
//! conditional (`member(..., when = ...)`) or sorted (`sorted(..., score =
//! ...)`) index a marker field named after the index: `1` while a member, the
//! score while scored. A field that is absent means "not indexed".

use crate::prefix::KeyPrefix;
use crate::spec::{IndexSpec, Source};
use crate::template::{KeyTemplate, RenderError};

/// The key of the entry of index `ix` (whose key template is `template`)
/// that document `id` of `scope` holds according to its stored fields
/// (`stored(name)`: the hash field `name`, if present); `None` when the
/// fields say it is not indexed.
///
/// # Errors
/// A stored value that cannot be a key segment: a write never stores one,
/// so the hash is damaged.
pub fn stored_entry_key<'v>(
    ix: &IndexSpec<'_>,
    template: &KeyTemplate,
    prefix: &KeyPrefix,
    id: &'v str,
    scope: &'v str,
    stored: impl Fn(&str) -> Option<&'v str>,
) -> Result<Option<String>, RenderError> {
    if ix.kind().has_marker() && stored(ix.name).is_none() {
        return Ok(None);
    }
    let mut values: Vec<&str> = Vec::new();
    for p in template.placeholders() {
        let v = match ix.binding(p).map(|b| b.source) {
            Some(Source::Id) => Some(id),
            Some(Source::Scope) => Some(scope),
            _ => stored(p),
        };
        match v {
            Some(v) => values.push(v),
            None => return Ok(None),
        }
    }
    template.render(prefix, &values).map(Some)
}

/// Every key of the entry of index `ix` that document `id` of `scope`
/// holds according to its stored fields: none or one, as
/// [`stored_entry_key`] says, or for a multi-valued index one per value its
/// hash field keeps (encoded values joined by `|`).
///
/// # Errors
/// As [`stored_entry_key`]; a multi-valued index's field that is not a list
/// of encoded values.
pub fn stored_entry_keys<'v>(
    ix: &IndexSpec<'_>,
    template: &KeyTemplate,
    prefix: &KeyPrefix,
    id: &'v str,
    scope: &'v str,
    stored: impl Fn(&str) -> Option<&'v str>,
) -> Result<Vec<String>, RenderError> {
    if !ix.kind().is_each() {
        return Ok(stored_entry_key(ix, template, prefix, id, scope, stored)?.into_iter().collect());
    }
    let Some(text) = stored(ix.name) else { return Ok(Vec::new()) };
    let bad = || RenderError::StoredValues { template: ix.key.to_owned(), text: text.to_owned() };
    // A write never stores more values than it indexes.
    if text.split('|').count() > crate::spec::MAX_EACH_VALUES {
        return Err(bad());
    }
    let mut keys = Vec::new();
    for part in text.split('|') {
        let value = crate::encode::decode(part).ok_or_else(bad)?;
        let values: Vec<&str> = template
            .placeholders()
            .map(|p| match ix.binding(p).map(|b| b.source) {
                Some(Source::Scope) => scope,
                Some(Source::Id) => id,
                _ => &*value,
            })
            .collect();
        keys.push(template.render(prefix, &values)?);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Binding;

    const WHEN: Source<'static> = Source::Method("running");
    const BY_STATE: &[Binding<'static>] = &[
        Binding { placeholder: "scope", source: Source::Scope },
        Binding { placeholder: "state", source: Source::Field("state") },
    ];

    fn ix(when: Option<Source<'static>>, score: Option<Source<'static>>) -> IndexSpec<'static> {
        IndexSpec { name: "ix", key: "t:by:{scope}:{state}", bindings: BY_STATE, when, score, max: None, each: false }
    }

    fn entry(ix: &IndexSpec<'_>, fields: &[(&'static str, &'static str)]) -> Option<String> {
        let t = KeyTemplate::parse(ix.key).unwrap();
        let p = KeyPrefix::new("p").unwrap();
        stored_entry_key(ix, &t, &p, "d1", "s1", |n| fields.iter().find(|(f, _)| *f == n).map(|(_, v)| *v)).unwrap()
    }

    #[test]
    fn a_multi_valued_entry_has_a_key_per_stored_value() {
        const BY_TAG: &[Binding<'static>] = &[
            Binding { placeholder: "scope", source: Source::Scope },
            Binding { placeholder: "tag", source: Source::Field("tags") },
        ];
        let ix = IndexSpec {
            name: "by_tag",
            key: "t:tag:{scope}:{tag}",
            bindings: BY_TAG,
            when: None,
            score: None,
            max: None,
            each: true,
        };
        let t = KeyTemplate::parse(ix.key).unwrap();
        let p = KeyPrefix::new("p").unwrap();
        let keys = |text: Option<&'static str>| {
            stored_entry_keys(&ix, &t, &p, "d1", "s1", |n| if n == "by_tag" { text } else { None })
        };
        assert_eq!(keys(None).unwrap(), Vec::<String>::new());
        assert_eq!(keys(Some("a|b%3Ac")).unwrap(), ["p:t:tag:s1:a", "p:t:tag:s1:b%3Ac"]);
        for corrupt in ["", "a||b", "b:c", "a|%zz"] {
            assert!(matches!(keys(Some(corrupt)), Err(RenderError::StoredValues { .. })), "{corrupt}");
        }
    }

    #[test]
    fn placeholders_come_from_stored_fields_and_markers_gate_membership() {
        let plain = ix(None, None);
        assert_eq!(entry(&plain, &[("state", "A")]).as_deref(), Some("p:t:by:s1:A"));
        assert_eq!(entry(&plain, &[]), None, "no stored value: not indexed");
        for gated in [ix(Some(WHEN), None), ix(None, Some(Source::Field("due")))] {
            assert_eq!(entry(&gated, &[("state", "A")]), None, "no marker: not a member");
            assert_eq!(entry(&gated, &[("state", "A"), ("ix", "1")]).as_deref(), Some("p:t:by:s1:A"));
        }
    }
}
