use super::*;
use crate::encode::ValueError;

fn p() -> KeyPrefix {
    KeyPrefix::default()
}

fn kinds(src: &str) -> Vec<TemplateErrorKind> {
    KeyTemplate::parse(src).unwrap_err().into_iter().map(|e| e.kind).collect()
}

#[test]
fn parses_reference_templates() {
    let t = KeyTemplate::parse("jobresponse:bystate:{scope}:{state}").unwrap();
    assert_eq!(t.placeholders().collect::<Vec<_>>(), ["scope", "state"]);
    let t = KeyTemplate::parse("sfc:event:{scope}:{source}|{id}").unwrap();
    assert_eq!(t.placeholders().collect::<Vec<_>>(), ["scope", "source", "id"]);
    assert_eq!(t.segments().len(), 4);
    assert_eq!(t.segments()[3].len(), 2);
    assert!(KeyTemplate::parse("scopes").unwrap().placeholders().next().is_none());
}

#[test]
fn syntax_errors_are_all_reported() {
    assert_eq!(kinds(""), [TemplateErrorKind::Empty]);
    assert_eq!(kinds(":a"), [TemplateErrorKind::LeadingColon]);
    assert_eq!(kinds("a:"), [TemplateErrorKind::TrailingColon]);
    assert_eq!(kinds("a::b"), [TemplateErrorKind::EmptySegment(':')]);
    assert_eq!(kinds("a:|b"), [TemplateErrorKind::EmptySegment('|')]);
    assert_eq!(kinds("a*b"), [TemplateErrorKind::ForbiddenChar { ch: '*' }]);
    assert_eq!(kinds("a:{x"), [TemplateErrorKind::Unclosed]);
    assert_eq!(kinds("a:x}"), [TemplateErrorKind::StrayClose]);
    assert_eq!(kinds("a:{}"), [TemplateErrorKind::BadPlaceholderName(String::new())]);
    assert_eq!(kinds("a:{1x}"), [TemplateErrorKind::BadPlaceholderName("1x".into())]);
    assert_eq!(kinds("a:x{id}"), [TemplateErrorKind::Glued("id".into())]);
    assert_eq!(kinds("msg/{id}"), [TemplateErrorKind::GluedSeparator("id".into(), "msg:{id}".into())]);
    assert_eq!(
        TemplateErrorKind::GluedSeparator("id".into(), "msg:{id}".into()).to_string(),
        "placeholder `{id}` is glued to other text: segments are separated by `:`; write `msg:{id}`"
    );
    assert_eq!(kinds("a:{id}:{id}"), [TemplateErrorKind::DuplicatePlaceholder("id".into())]);
    // several at once
    assert_eq!(
        kinds("a b:c*:{}"),
        [
            TemplateErrorKind::ForbiddenChar { ch: ' ' },
            TemplateErrorKind::ForbiddenChar { ch: '*' },
            TemplateErrorKind::BadPlaceholderName(String::new())
        ]
    );
    let e = &KeyTemplate::parse("ab:c?").unwrap_err()[0];
    assert_eq!(e.span, 4..5);
}

#[test]
fn render_and_parse_back() {
    let t = KeyTemplate::parse("sfc:event:{scope}:{source}|{id}").unwrap();
    let k = t.render(&p(), &["s1", "urn:a|b", "e-1"]).unwrap();
    assert_eq!(k, "microdcs:sfc:event:s1:urn%3Aa%7Cb|e-1");
    assert_eq!(t.parse_key(&p(), &k).unwrap(), ["s1", "urn:a|b", "e-1"]);
    assert_eq!(t.parse_key(&p(), "microdcs:sfc:event:s1:x"), None);
    assert_eq!(t.parse_key(&p(), "other:sfc:event:s1:x|y"), None);
    assert!(matches!(t.render(&p(), &["s1"]), Err(RenderError::Arity { expected: 3, given: 1, .. })));
    let e = t.render(&p(), &["s1", "", "x"]).unwrap_err();
    assert!(
        matches!(e, RenderError::Value(KeyError { ref placeholder, error: ValueError::Empty, .. }) if placeholder == "source")
    );
}

#[test]
fn id_that_looks_like_another_family() {
    let doc = KeyTemplate::parse("joborder:{id}").unwrap();
    let list = KeyTemplate::parse("joborder:list:{scope}").unwrap();
    assert!(!doc.overlaps(&list));
    let k = doc.render(&p(), &["list:s1"]).unwrap();
    assert_eq!(k, "microdcs:joborder:list%3As1");
    assert_eq!(list.parse_key(&p(), &k), None);
    assert_eq!(doc.parse_key(&p(), &k).unwrap(), ["list:s1"]);
    let lk = list.render(&p(), &["s1"]).unwrap();
    assert_eq!(doc.parse_key(&p(), &lk), None);
}

#[test]
fn overlap_rule() {
    let o = |a, b| templates_overlap(a, b);
    assert!(o("joborder:{id}", "joborder:{x}"));
    assert!(o("joborder:{id}", "joborder:list"));
    assert!(o("a:{x}|b", "a:c|{y}"));
    assert!(!o("joborder:{id}", "joborder:list:{scope}"));
    assert!(!o("a:{x}|b", "a:{x}|c"));
    assert!(!o("a:{x}|b", "a:{x}:b"));
    assert!(!o("scopes", "changes:{scope}"));
    assert!(!o("sfc:state:{id}", "sfc:work:{scope}"));
    assert!(o("{a}:x", "y:{b}"));
}

#[test]
fn hash_tags() {
    let t = KeyTemplate::parse("lease:{#name}:fence").unwrap();
    assert_eq!(t.placeholders().collect::<Vec<_>>(), ["name"]);
    let k = t.render(&p(), &["l:1{x}"]).unwrap();
    assert_eq!(k, "microdcs:lease:{l%3A1%7Bx%7D}:fence");
    assert_eq!(t.parse_key(&p(), &k).unwrap(), ["l:1{x}"]);
    assert_eq!(t.parse_key(&p(), "microdcs:lease:l1:fence"), None);
    assert_eq!(t.scan_pattern(&p(), &[None]).unwrap(), "microdcs:lease:{*}:fence");
    assert!(!templates_overlap("lease:{#name}:fence", "lease:{other}:fence"));
    assert!(!templates_overlap("lease:{#name}:fence", "lease:x:fence"));
    assert!(templates_overlap("lease:{#name}:fence", "lease:{#n}:fence"));
    assert!(KeyTemplate::parse("a:{#}").is_err());
}

#[test]
fn scan_patterns_escape_globs() {
    let t = KeyTemplate::parse("jobresponse:bystate:{scope}:{state}").unwrap();
    assert_eq!(t.scan_pattern(&p(), &[Some("s*1"), None]).unwrap(), "microdcs:jobresponse:bystate:s%2A1:*");
    assert_eq!(t.scan_pattern(&p(), &[None, None]).unwrap(), "microdcs:jobresponse:bystate:*:*");
}

#[test]
fn a_hash_tag_placeholder_counts_as_a_use_of_its_name() {
    // A name is one value, whether written plain or as a hash tag: rendering
    // takes values in placeholder order, so a repeated name would silently
    // consume two values for what reads as one.
    let dup = [TemplateErrorKind::DuplicatePlaceholder("a".into())];
    for src in ["{#a}:{#a}", "{a}:{#a}", "{#a}:{a}", "x:{#a}|{a}"] {
        assert_eq!(kinds(src), dup, "{src}");
    }
    let e = &KeyTemplate::parse("{a}:{#a}").unwrap_err()[0];
    assert_eq!(e.span, 4..8);
    assert!(KeyTemplate::parse("lease:{#a}:{b}").is_ok());
}
