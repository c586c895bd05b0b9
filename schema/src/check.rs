//! Checks on document and keyspace specs.
//!
//! Each rule is one function; every problem is collected (not only the first)
//! and carries its [`Origin`] so the derive can point at the attribute.

use std::fmt;

use crate::spec::{DocumentSpec, Family, KeyType, KeyspaceSpec, RESERVED_FIELDS, Role, Source};
use crate::template::{KeyTemplate, TemplateErrorKind, templates_overlap};

/// Which attribute of a document type (or entry of a keyspace) a problem is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    /// `kind = ...`
    Kind,
    /// `key = ...` (the document key)
    Key,
    /// `list(...)`
    List,
    /// `unique(...)` number n.
    Unique(usize),
    /// `group(...)` number n.
    Group(usize),
    /// `changes = ...`
    Changes,
    /// `nudge = ...`
    Nudge,
    /// `registry = ...`
    Registry,
    /// A family declared in a keyspace, by name.
    Family(String),
    /// A document type listed in a keyspace, by type name.
    Document(String),
}

impl Attr {
    fn of_role(role: Role<'_>) -> Attr {
        match role {
            Role::Document => Attr::Key,
            Role::List => Attr::List,
            Role::Unique(i) => Attr::Unique(i),
            Role::Group(i) => Attr::Group(i),
            Role::Declared(n) => Attr::Family(n.to_owned()),
        }
    }
}

/// Where a problem comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// Document type or keyspace name.
    pub owner: String,
    /// Attribute.
    pub attr: Attr,
    /// Placeholder concerned, if any.
    pub placeholder: Option<String>,
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaErrorKind {
    /// Template syntax.
    Template(TemplateErrorKind),
    /// The kind is not a lower-case identifier.
    BadKind(String),
    /// The document key has no `{id}`.
    KeyWithoutId,
    /// The document key uses a placeholder other than `{id}`.
    KeyExtraPlaceholder(String),
    /// The list key uses a placeholder other than `{scope}`, or lacks `{scope}`.
    ListPlaceholder(Option<String>),
    /// A placeholder has no binding.
    Unbound(String),
    /// A binding names a placeholder the template does not have.
    UnusedBinding(String),
    /// An index placeholder would be stored in a reserved hash field.
    ReservedField(String),
    /// Two indexes store different values in the same hash field.
    FieldClash {
        /// Hash field name.
        field: String,
        /// The other index.
        other: String,
    },
    /// Two families can render the same key.
    Overlap {
        /// Description of the first family.
        first: String,
        /// Description of the second family.
        second: String,
    },
    /// A shared template (`changes`, `nudge`, `registry`) has the wrong placeholders.
    SharedTemplate {
        /// Which placeholders it must have.
        expected: &'static str,
    },
    /// A document family uses a hash-tag placeholder (only declared families may).
    HashTagInDocument(String),
    /// Two families or indexes share a name.
    DuplicateName(String),
    /// A document refers to a shared family the keyspace does not declare.
    Undeclared {
        /// Template referred to.
        template: String,
        /// Expected type.
        key_type: KeyType,
    },
}

/// A problem with a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// Where.
    pub origin: Origin,
    /// What.
    pub kind: SchemaErrorKind,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SchemaErrorKind as K;
        match &self.kind {
            K::Template(t) => write!(f, "{t}"),
            K::BadKind(k) => write!(f, "kind `{k}` must be a lower-case identifier ([a-z][a-z0-9_]*)"),
            K::KeyWithoutId => write!(f, "the document key must contain `{{id}}`"),
            K::KeyExtraPlaceholder(p) => {
                write!(f, "the document key may only use `{{id}}` (a document is found by its id alone), not `{{{p}}}`")
            }
            K::ListPlaceholder(Some(p)) => {
                write!(f, "the list key may only use `{{scope}}`, not `{{{p}}}` (one list per scope)")
            }
            K::ListPlaceholder(None) => write!(f, "the list key must contain `{{scope}}` (one list per scope)"),
            K::Unbound(p) => write!(f, "placeholder `{{{p}}}` is not bound to a field or method"),
            K::UnusedBinding(p) => write!(f, "`{p}` is bound but the key template has no `{{{p}}}`"),
            K::ReservedField(p) => write!(
                f,
                "placeholder `{{{p}}}` would be stored in the reserved hash field `{p}` (reserved: {})",
                RESERVED_FIELDS.join(", ")
            ),
            K::FieldClash { field, other } => write!(
                f,
                "placeholder `{{{field}}}` is bound to a different source in index `{other}`; both would be stored in hash field `{field}`"
            ),
            K::Overlap { first, second } => {
                write!(f, "key families overlap: {first} and {second} can render the same key")
            }
            K::SharedTemplate { expected } => write!(f, "this template must use exactly {expected}"),
            K::DuplicateName(n) => write!(f, "the name `{n}` is used twice"),
            K::HashTagInDocument(p) => write!(
                f,
                "hash-tag placeholder `{{#{p}}}` in a document family: documents live on one primary; use `{{{p}}}`"
            ),
            K::Undeclared { template, key_type } => write!(
                f,
                "the keyspace does not declare the {} family `{template}` that this document type uses",
                key_type.type_name()
            ),
        }
    }
}

impl std::error::Error for SchemaError {}

fn origin(owner: &str, attr: Attr, placeholder: Option<&str>) -> Origin {
    Origin { owner: owner.to_owned(), attr, placeholder: placeholder.map(str::to_owned) }
}

/// Describes a family for messages: ``list `joborder:list:{scope}` of `JobOrder` ``.
pub fn describe(f: &Family<'_>) -> String {
    match f.role {
        Role::Document => format!("document key `{}` of `{}`", f.key, f.owner),
        Role::List => format!("list `{}` of `{}`", f.key, f.owner),
        Role::Unique(_) => format!("unique index `{}` (`{}`) of `{}`", f.name, f.key, f.owner),
        Role::Group(_) => format!("group index `{}` (`{}`) of `{}`", f.name, f.key, f.owner),
        Role::Declared(n) => format!("family `{n}` (`{}`) of keyspace `{}`", f.key, f.owner),
    }
}

/// Parses a template, turning syntax errors into schema errors.
fn parse_at(src: &str, owner: &str, attr: &Attr, errors: &mut Vec<SchemaError>) -> Option<KeyTemplate> {
    match KeyTemplate::parse(src) {
        Ok(t) => Some(t),
        Err(es) => {
            errors.extend(es.into_iter().map(|e| SchemaError {
                origin: origin(owner, attr.clone(), None),
                kind: SchemaErrorKind::Template(e.kind),
            }));
            None
        }
    }
}

/// Checks one document type: template syntax, the id in the document key,
/// list placeholders, index bindings and hash fields, and that its own
/// families are pairwise disjoint.
pub fn check_document(doc: &DocumentSpec<'_>) -> Vec<SchemaError> {
    let mut errors = Vec::new();
    check_kind(doc, &mut errors);
    check_document_key(doc, &mut errors);
    check_list(doc, &mut errors);
    check_indexes(doc, &mut errors);
    check_shared(doc, &mut errors);
    let families: Vec<_> = doc.families().collect();
    check_disjoint(&families, &mut errors);
    for f in &families {
        if let Ok(t) = KeyTemplate::parse(f.key) {
            for atom in t.segments().iter().flatten() {
                if let crate::template::Atom::HashTag(p) = atom {
                    errors.push(SchemaError {
                        origin: origin(doc.type_name, Attr::of_role(f.role), Some(p)),
                        kind: SchemaErrorKind::HashTagInDocument(p.clone()),
                    });
                }
            }
        }
    }
    errors
}

/// The kind names channels and change entries: a lower-case identifier.
fn check_kind(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let k = doc.kind.as_bytes();
    let ok = !k.is_empty()
        && k[0].is_ascii_lowercase()
        && k.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_');
    if !ok {
        errors.push(SchemaError {
            origin: origin(doc.type_name, Attr::Kind, None),
            kind: SchemaErrorKind::BadKind(doc.kind.to_owned()),
        });
    }
}

/// The document key contains `{id}` and nothing else.
fn check_document_key(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let Some(t) = parse_at(doc.key, doc.type_name, &Attr::Key, errors) else { return };
    if !t.has_placeholder("id") {
        errors
            .push(SchemaError { origin: origin(doc.type_name, Attr::Key, None), kind: SchemaErrorKind::KeyWithoutId });
    }
    for p in t.placeholders().filter(|p| *p != "id") {
        errors.push(SchemaError {
            origin: origin(doc.type_name, Attr::Key, Some(p)),
            kind: SchemaErrorKind::KeyExtraPlaceholder(p.to_owned()),
        });
    }
}

/// The list key has exactly `{scope}`.
fn check_list(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let Some(list) = doc.list else { return };
    let Some(t) = parse_at(list.key, doc.type_name, &Attr::List, errors) else { return };
    if !t.has_placeholder("scope") {
        errors.push(SchemaError {
            origin: origin(doc.type_name, Attr::List, None),
            kind: SchemaErrorKind::ListPlaceholder(None),
        });
    }
    for p in t.placeholders().filter(|p| *p != "scope") {
        errors.push(SchemaError {
            origin: origin(doc.type_name, Attr::List, Some(p)),
            kind: SchemaErrorKind::ListPlaceholder(Some(p.to_owned())),
        });
    }
}

/// Index bindings cover every placeholder, name no missing one, and the hash
/// fields they store (one per field or method placeholder) do not collide.
fn check_indexes(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let mut names: Vec<&str> = Vec::new();
    let mut fields: Vec<(&str, Source<'_>, &str)> = Vec::new();
    let all = doc.unique.iter().enumerate().map(|(i, x)| (Attr::Unique(i), x));
    let all = all.chain(doc.groups.iter().enumerate().map(|(i, x)| (Attr::Group(i), x)));
    for (attr, ix) in all {
        let err = |kind, p: Option<&str>| SchemaError { origin: origin(doc.type_name, attr.clone(), p), kind };
        if names.contains(&ix.name) {
            errors.push(err(SchemaErrorKind::DuplicateName(ix.name.to_owned()), None));
        }
        names.push(ix.name);
        let Some(t) = parse_at(ix.key, doc.type_name, &attr, errors) else { continue };
        for p in t.placeholders() {
            if ix.binding(p).is_none() {
                errors.push(err(SchemaErrorKind::Unbound(p.to_owned()), Some(p)));
            }
        }
        for b in ix.bindings {
            if !t.has_placeholder(b.placeholder) {
                errors.push(err(SchemaErrorKind::UnusedBinding(b.placeholder.to_owned()), Some(b.placeholder)));
                continue;
            }
            if matches!(b.source, Source::Id | Source::Scope) {
                continue;
            }
            if RESERVED_FIELDS.contains(&b.placeholder) {
                errors.push(err(SchemaErrorKind::ReservedField(b.placeholder.to_owned()), Some(b.placeholder)));
            }
            match fields.iter().find(|(f, _, _)| *f == b.placeholder) {
                Some((_, src, other)) if *src != b.source => errors.push(err(
                    SchemaErrorKind::FieldClash { field: b.placeholder.to_owned(), other: (*other).to_owned() },
                    Some(b.placeholder),
                )),
                Some(_) => {}
                None => fields.push((b.placeholder, b.source, ix.name)),
            }
        }
    }
}

/// `changes` uses exactly `{scope}`, `nudge` exactly `{kind}`, `registry` none.
fn check_shared(doc: &DocumentSpec<'_>, errors: &mut Vec<SchemaError>) {
    let rules: [(&str, Attr, &[&str], &'static str); 3] = [
        (doc.changes, Attr::Changes, &["scope"], "the placeholder `{scope}`"),
        (doc.nudge, Attr::Nudge, &["kind"], "the placeholder `{kind}`"),
        (doc.registry, Attr::Registry, &[], "no placeholder"),
    ];
    for (src, attr, want, expected) in rules {
        let Some(t) = parse_at(src, doc.type_name, &attr, errors) else { continue };
        if !t.placeholders().eq(want.iter().copied()) {
            errors.push(SchemaError {
                origin: origin(doc.type_name, attr, None),
                kind: SchemaErrorKind::SharedTemplate { expected },
            });
        }
    }
}

/// No two key families can render the same key; channels are compared only
/// with channels. Families whose template does not parse are skipped (their
/// syntax error is reported elsewhere).
fn check_disjoint(families: &[Family<'_>], errors: &mut Vec<SchemaError>) {
    let valid: Vec<&Family<'_>> = families.iter().filter(|f| KeyTemplate::parse(f.key).is_ok()).collect();
    for (i, a) in valid.iter().enumerate() {
        for b in &valid[i + 1..] {
            if (a.key_type == KeyType::Channel) != (b.key_type == KeyType::Channel) {
                continue;
            }
            if templates_overlap(a.key, b.key) {
                // Reported at the later family, naming both.
                errors.push(SchemaError {
                    origin: origin(b.owner, Attr::of_role(b.role), None),
                    kind: SchemaErrorKind::Overlap { first: describe(a), second: describe(b) },
                });
            }
        }
    }
}

/// Checks a whole keyspace: every document, every declared family's syntax,
/// unique names, the shared families documents use are declared with the right
/// type, and no two families anywhere can render the same key.
pub fn check_keyspace(ks: &KeyspaceSpec<'_>) -> Vec<SchemaError> {
    let mut errors = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for doc in ks.documents {
        if names.contains(&doc.type_name) {
            errors.push(SchemaError {
                origin: origin(ks.name, Attr::Document(doc.type_name.to_owned()), None),
                kind: SchemaErrorKind::DuplicateName(doc.type_name.to_owned()),
            });
        }
        names.push(doc.type_name);
        errors.extend(check_document(doc));
        for (src, key_type, attr) in [
            (doc.changes, KeyType::Stream, Attr::Changes),
            (doc.nudge, KeyType::Channel, Attr::Nudge),
            (doc.registry, KeyType::Set, Attr::Registry),
        ] {
            if !ks.families.iter().any(|f| f.key == src && f.key_type == key_type) {
                errors.push(SchemaError {
                    origin: origin(doc.type_name, attr, None),
                    kind: SchemaErrorKind::Undeclared { template: src.to_owned(), key_type },
                });
            }
        }
    }
    let mut fam_names: Vec<&str> = Vec::new();
    for f in ks.families {
        let attr = Attr::Family(f.name.to_owned());
        if fam_names.contains(&f.name) {
            errors.push(SchemaError {
                origin: origin(ks.name, attr.clone(), None),
                kind: SchemaErrorKind::DuplicateName(f.name.to_owned()),
            });
        }
        fam_names.push(f.name);
        parse_at(f.key, ks.name, &attr, &mut errors);
    }
    // Families within one document were compared by `check_document`; compare the rest.
    let families: Vec<Family<'_>> = ks.all_families().collect();
    for (i, a) in families.iter().enumerate() {
        for b in &families[i + 1..] {
            let same_doc = a.owner == b.owner && !matches!(b.role, Role::Declared(_));
            if same_doc {
                continue;
            }
            check_disjoint(&[*a, *b], &mut errors);
        }
    }
    errors
}

/// A message built at compile time (in a `const`), for keyspace checks that
/// run as constant evaluation. Holds up to 512 bytes; longer text is cut at a
/// whole-piece boundary and ends with `...`.
#[derive(Debug, Clone, Copy)]
pub struct ConstMessage {
    buf: [u8; 512],
    len: usize,
    full: bool,
}

impl ConstMessage {
    /// An empty message.
    pub const fn new() -> Self {
        ConstMessage { buf: [0; 512], len: 0, full: false }
    }

    /// Appends `s` if it fits, else marks the message as cut.
    pub const fn push(mut self, s: &str) -> Self {
        let b = s.as_bytes();
        if self.full || self.len + b.len() + 3 > self.buf.len() {
            if !self.full {
                self.full = true;
                let mut k = 0;
                while k < 3 {
                    self.buf[self.len] = b'.';
                    self.len += 1;
                    k += 1;
                }
            }
            return self;
        }
        let mut k = 0;
        while k < b.len() {
            self.buf[self.len + k] = b[k];
            k += 1;
        }
        self.len += b.len();
        self
    }

    /// Whether nothing was written.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The text.
    pub const fn as_str(&self) -> &str {
        let (head, _) = self.buf.split_at(self.len);
        match core::str::from_utf8(head) {
            Ok(s) => s,
            Err(_) => "keyspace check failed (message not printable)",
        }
    }

    /// Must read exactly like [`describe`].
    const fn family(self, f: &Family<'_>) -> Self {
        match f.role {
            Role::Document => self.push("document key `").push(f.key).push("` of `").push(f.owner).push("`"),
            Role::List => self.push("list `").push(f.key).push("` of `").push(f.owner).push("`"),
            Role::Unique(_) => self
                .push("unique index `")
                .push(f.name)
                .push("` (`")
                .push(f.key)
                .push("`) of `")
                .push(f.owner)
                .push("`"),
            Role::Group(_) => {
                self.push("group index `").push(f.name).push("` (`").push(f.key).push("`) of `").push(f.owner).push("`")
            }
            Role::Declared(n) => {
                self.push("family `").push(n).push("` (`").push(f.key).push("`) of keyspace `").push(f.owner).push("`")
            }
        }
    }
}

impl Default for ConstMessage {
    fn default() -> Self {
        Self::new()
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn same_type(a: KeyType, b: KeyType) -> bool {
    a as u8 == b as u8
}

/// The cross-family part of [`check_keyspace`] as a `const fn`, for the
/// `keyspace!` macro: the first overlap between two families, or the first
/// shared family a document uses but the keyspace does not declare, as a
/// message naming both sides. Empty when the keyspace is sound.
///
/// Template syntax and per-document rules are checked by the derive and the
/// macro with spans; this function assumes valid templates.
pub const fn keyspace_problem(ks: &KeyspaceSpec<'_>) -> ConstMessage {
    let n = ks.family_count();
    let mut i = 0;
    while i < n {
        let a = ks.family(i);
        let mut j = i + 1;
        while j < n {
            let b = ks.family(j);
            let channels = same_type(a.key_type, KeyType::Channel) == same_type(b.key_type, KeyType::Channel);
            if channels && templates_overlap(a.key, b.key) {
                return ConstMessage::new()
                    .push("key families overlap: ")
                    .family(&a)
                    .push(" and ")
                    .family(&b)
                    .push(" can render the same key");
            }
            j += 1;
        }
        i += 1;
    }
    let mut d = 0;
    while d < ks.documents.len() {
        let doc = &ks.documents[d];
        let refs = [(doc.changes, KeyType::Stream), (doc.nudge, KeyType::Channel), (doc.registry, KeyType::Set)];
        let mut r = 0;
        while r < refs.len() {
            let (src, ty) = refs[r];
            let mut found = false;
            let mut f = 0;
            while f < ks.families.len() {
                if str_eq(ks.families[f].key, src) && same_type(ks.families[f].key_type, ty) {
                    found = true;
                }
                f += 1;
            }
            if !found {
                return ConstMessage::new()
                    .push("document type `")
                    .push(doc.type_name)
                    .push("` uses the ")
                    .push(ty.type_name())
                    .push(" `")
                    .push(src)
                    .push("`, which keyspace `")
                    .push(ks.name)
                    .push("` does not declare");
            }
            r += 1;
        }
        d += 1;
    }
    ConstMessage::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Binding, FamilySpec, IndexSpec, ListSpec};

    const BY_ORDER: [Binding<'static>; 1] = [Binding { placeholder: "order", source: Source::Field("job_order_id") }];
    const BY_STATE: [Binding<'static>; 2] = [
        Binding { placeholder: "scope", source: Source::Scope },
        Binding { placeholder: "state", source: Source::Method("normalized_state") },
    ];
    const UNIQUE: [IndexSpec<'static>; 1] =
        [IndexSpec { name: "by_order", key: "jobresponse:byorder:{order}", bindings: &BY_ORDER }];
    const GROUPS: [IndexSpec<'static>; 1] =
        [IndexSpec { name: "by_state", key: "jobresponse:bystate:{scope}:{state}", bindings: &BY_STATE }];

    const fn doc(type_name: &'static str, kind: &'static str, key: &'static str) -> DocumentSpec<'static> {
        DocumentSpec {
            type_name,
            kind,
            key,
            id_field: "id",
            scope_field: "scope",
            list: None,
            unique: &[],
            groups: &[],
            changes: "changes:{scope}",
            nudge: "nudge:{kind}",
            registry: "scopes",
        }
    }

    const JOB_RESPONSE: DocumentSpec<'static> = DocumentSpec {
        list: Some(ListSpec { key: "jobresponse:list:{scope}", score: Some(Source::Field("start_time")) }),
        unique: &UNIQUE,
        groups: &GROUPS,
        ..doc("JobResponse", "jobresponse", "jobresponse:{id}")
    };

    const SHARED: [FamilySpec<'static>; 3] = [
        FamilySpec { name: "changes", key: "changes:{scope}", key_type: KeyType::Stream },
        FamilySpec { name: "nudge", key: "nudge:{kind}", key_type: KeyType::Channel },
        FamilySpec { name: "scopes", key: "scopes", key_type: KeyType::Set },
    ];

    #[test]
    fn job_response_is_valid() {
        assert_eq!(check_document(&JOB_RESPONSE), []);
        let ks = KeyspaceSpec { name: "Plant", documents: &[JOB_RESPONSE], families: &SHARED };
        assert_eq!(check_keyspace(&ks), []);
        assert!(keyspace_problem(&ks).is_empty());
    }

    #[test]
    fn document_rules() {
        let kinds = |d: &DocumentSpec<'_>| check_document(d).into_iter().map(|e| e.kind).collect::<Vec<_>>();
        assert_eq!(
            kinds(&doc("A", "a", "a:{x}")),
            [SchemaErrorKind::KeyWithoutId, SchemaErrorKind::KeyExtraPlaceholder("x".into())]
        );
        assert_eq!(kinds(&doc("A", "Bad Kind", "a:{id}")), [SchemaErrorKind::BadKind("Bad Kind".into())]);
        let list = DocumentSpec { list: Some(ListSpec { key: "a:list:{id}", score: None }), ..doc("A", "a", "a:{id}") };
        assert_eq!(
            kinds(&list),
            [SchemaErrorKind::ListPlaceholder(None), SchemaErrorKind::ListPlaceholder(Some("id".into()))]
        );
        // A list that overlaps the document key.
        let list = DocumentSpec { list: Some(ListSpec { key: "a:{scope}", score: None }), ..doc("A", "a", "a:{id}") };
        let errs = check_document(&list);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].origin.attr, Attr::List);
        assert!(errs[0].to_string().contains("document key `a:{id}` of `A`"), "{}", errs[0]);
        assert!(errs[0].to_string().contains("list `a:{scope}` of `A`"), "{}", errs[0]);
    }

    #[test]
    fn index_rules() {
        const UNBOUND: [IndexSpec<'static>; 1] = [IndexSpec { name: "by_x", key: "a:byx:{x}", bindings: &[] }];
        const RESERVED: [IndexSpec<'static>; 1] = [IndexSpec {
            name: "by_v",
            key: "a:byv:{v}",
            bindings: &[Binding { placeholder: "v", source: Source::Field("v") }],
        }];
        const CLASH: [IndexSpec<'static>; 2] = [
            IndexSpec {
                name: "one",
                key: "a:one:{x}",
                bindings: &[Binding { placeholder: "x", source: Source::Field("f") }],
            },
            IndexSpec {
                name: "two",
                key: "a:two:{x}",
                bindings: &[Binding { placeholder: "x", source: Source::Field("g") }],
            },
        ];
        let d = DocumentSpec { unique: &UNBOUND, ..doc("A", "a", "a:{id}") };
        assert_eq!(check_document(&d)[0].kind, SchemaErrorKind::Unbound("x".into()));
        let d = DocumentSpec { unique: &RESERVED, ..doc("A", "a", "a:{id}") };
        assert_eq!(check_document(&d)[0].kind, SchemaErrorKind::ReservedField("v".into()));
        let d = DocumentSpec { groups: &CLASH, ..doc("A", "a", "a:{id}") };
        let e = check_document(&d);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].origin.attr, Attr::Group(1));
    }

    #[test]
    fn keyspace_overlap_names_both() {
        const A: DocumentSpec<'static> = doc("JobOrder", "joborder", "joborder:{id}");
        const B: DocumentSpec<'static> = DocumentSpec {
            list: Some(ListSpec { key: "joborder:{scope}", score: None }),
            ..doc("Other", "other", "other:{id}")
        };
        let ks = KeyspaceSpec { name: "Plant", documents: &[A, B], families: &SHARED };
        let errs = check_keyspace(&ks);
        assert_eq!(errs.len(), 1, "{errs:?}");
        let msg = keyspace_problem(&ks);
        assert_eq!(
            msg.as_str(),
            "key families overlap: document key `joborder:{id}` of `JobOrder` and list `joborder:{scope}` of `Other` can render the same key"
        );
        assert_eq!(
            errs[0].to_string(),
            "key families overlap: document key `joborder:{id}` of `JobOrder` and list `joborder:{scope}` of `Other` can render the same key"
        );
    }

    #[test]
    fn keyspace_requires_shared_families() {
        const A: DocumentSpec<'static> = doc("JobOrder", "joborder", "joborder:{id}");
        let ks = KeyspaceSpec { name: "Plant", documents: &[A], families: &SHARED[1..] };
        let errs = check_keyspace(&ks);
        assert!(matches!(&errs[0].kind, SchemaErrorKind::Undeclared { key_type: KeyType::Stream, .. }));
        assert_eq!(
            keyspace_problem(&ks).as_str(),
            "document type `JobOrder` uses the stream `changes:{scope}`, which keyspace `Plant` does not declare"
        );
    }

    #[test]
    fn const_message_truncates() {
        let long = "x".repeat(600);
        let m = ConstMessage::new().push("a").push(&long).push("b");
        assert_eq!(m.as_str(), "a...");
    }
}
