//! Key templates: `jobresponse:bystate:{scope}:{state}`, `sfc:event:{scope}:{source}|{id}`.
//!
//! # Syntax
//!
//! A template is one or more *segments* separated by `:`. A segment is one or
//! more *atoms* separated by `|`. An atom is either a literal made of ASCII
//! letters, digits, `_`, `-` and `.`, or a single placeholder `{name}` whose
//! name is an identifier (`[A-Za-z_][A-Za-z0-9_]*`). A placeholder never shares
//! an atom with literal text or another placeholder, and appears at most once
//! (counting `{name}` and `{#name}` as the same name).
//! `{#name}` is a hash-tag placeholder: its value is written inside literal
//! braces (`lease:{#name}:fence` renders `lease:{l-1}:fence`), so all keys
//! with the same value share a cluster slot. Encoded values never contain a
//! brace, so the tag is always the whole value.
//!
//! Because encoded values never contain `:` or `|` (see [`crate::encode`]),
//! a rendered key splits back into exactly the template's atoms; two templates
//! can only render the same key if they have the same shape and the same
//! literal wherever both have a literal ([`templates_overlap`]).

use std::fmt;
use std::ops::Range;

use crate::encode;
pub use crate::encode::KeyError;
use crate::prefix::KeyPrefix;

/// One atom of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Atom {
    /// Literal text, written as is.
    Literal(String),
    /// A placeholder, by name.
    Placeholder(String),
    /// A hash-tag placeholder `{#name}`: the encoded value inside literal
    /// braces, so every key with the same value maps to one cluster slot.
    HashTag(String),
}

/// A parsed, valid key template.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    source: String,
    /// Segments (split on `:`), each a list of atoms (split on `|`).
    segments: Vec<Vec<Atom>>,
}

impl fmt::Debug for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyTemplate({:?})", self.source)
    }
}

impl fmt::Display for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// What is wrong with a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateErrorKind {
    /// The template is empty.
    #[error("the key template is empty")]
    Empty,
    /// The template starts with `:`.
    #[error("a key template cannot start with `:` (the key prefix and its `:` are added for you)")]
    LeadingColon,
    /// The template ends with `:`.
    #[error("a key template cannot end with `:`")]
    TrailingColon,
    /// Two separators in a row, or a separator at the start or end of a segment.
    #[error("empty segment: `{0}` must not follow `:` or `|` directly")]
    EmptySegment(char),
    /// A literal contains a character outside `[A-Za-z0-9_.-]`.
    #[error("character `{ch}` is not allowed in a key literal (allowed: ASCII letters, digits, `_`, `-`, `.`)")]
    ForbiddenChar {
        /// The offending character.
        ch: char,
    },
    /// A `{` without its `}`.
    #[error("unclosed placeholder: `{{` without `}}`")]
    Unclosed,
    /// A `}` without its `{`.
    #[error("`}}` without a matching `{{`")]
    StrayClose,
    /// `{}` or a name that is not an identifier.
    #[error("placeholder name `{0}` is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")]
    BadPlaceholderName(String),
    /// A placeholder glued to text or another placeholder inside one atom.
    #[error(
        "placeholder `{{{0}}}` must be a whole segment or `|`-separated part of one; it cannot be glued to other text"
    )]
    Glued(String),
    /// A placeholder glued to text by a separator of another convention
    /// (`msg/{id}`, `msg.{id}`): segments are separated by `:`. Carries the
    /// placeholder and the atom written the `:` way.
    #[error("placeholder `{{{0}}}` is glued to other text: segments are separated by `:`; write `{1}`")]
    GluedSeparator(String, String),
    /// The same placeholder twice.
    #[error("placeholder `{{{0}}}` appears more than once")]
    DuplicatePlaceholder(String),
}

/// A template problem and where it is, as a byte range in the template text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} (at byte {}..{} of `{template}`)", span.start, span.end)]
pub struct TemplateError {
    /// What is wrong.
    pub kind: TemplateErrorKind,
    /// Byte range in the template text.
    pub span: Range<usize>,
    /// The template text.
    pub template: String,
}

/// Rendering was given the wrong number of values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// A value was rejected.
    #[error(transparent)]
    Value(#[from] KeyError),
    /// The values a multi-valued index keeps in its hash field are not
    /// encoded values joined by `|` (a write never stores such a text).
    #[error("`{text}` is not a list of encoded values for `{template}`")]
    StoredValues {
        /// The template.
        template: String,
        /// The stored text.
        text: String,
    },
    /// Wrong number of values.
    #[error("`{template}` has {expected} placeholder(s), {given} value(s) were given")]
    Arity {
        /// The template.
        template: String,
        /// Number of placeholders.
        expected: usize,
        /// Number of values given.
        given: usize,
    },
}

fn is_literal_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Whether `name` is a valid placeholder name.
pub fn is_identifier(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

impl KeyTemplate {
    /// Parses and validates a template, reporting every problem found.
    ///
    /// # Errors
    /// Every syntax problem, each with its byte range.
    pub fn parse(source: &str) -> Result<Self, Vec<TemplateError>> {
        let mut errors = Vec::new();
        let mut err = |kind, span: Range<usize>| errors.push(TemplateError { kind, span, template: source.to_owned() });
        if source.is_empty() {
            err(TemplateErrorKind::Empty, 0..0);
            return Err(errors);
        }
        if source.starts_with(':') {
            err(TemplateErrorKind::LeadingColon, 0..1);
        }
        if source.len() > 1 && source.ends_with(':') {
            err(TemplateErrorKind::TrailingColon, source.len() - 1..source.len());
        }
        let mut segments: Vec<Vec<Atom>> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        let mut seg_start = 0;
        for seg in source.split(':') {
            let seg_range = seg_start..seg_start + seg.len();
            seg_start += seg.len() + 1;
            if seg.is_empty() {
                let at = seg_range.start;
                // Leading/trailing colons are reported above.
                if at != 0 && at != source.len() {
                    err(TemplateErrorKind::EmptySegment(':'), at.saturating_sub(1)..at + 1);
                }
                continue;
            }
            let mut atoms = Vec::new();
            let mut atom_start = seg_range.start;
            for atom in seg.split('|') {
                let range = atom_start..atom_start + atom.len();
                atom_start += atom.len() + 1;
                if atom.is_empty() {
                    err(TemplateErrorKind::EmptySegment('|'), range.start.saturating_sub(1)..range.start + 1);
                    continue;
                }
                if let Some(parsed) = parse_atom(atom, range.clone(), &mut err) {
                    // Plain and hash-tag placeholders share one name space:
                    // values are given by position, so a name used twice
                    // (in either form) would take two values for one name.
                    if let Atom::Placeholder(name) | Atom::HashTag(name) = &parsed {
                        if seen.contains(name) {
                            err(TemplateErrorKind::DuplicatePlaceholder(name.clone()), range);
                        } else {
                            seen.push(name.clone());
                        }
                    }
                    atoms.push(parsed);
                }
            }
            segments.push(atoms);
        }
        if errors.is_empty() { Ok(KeyTemplate { source: source.to_owned(), segments }) } else { Err(errors) }
    }

    /// The template text.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The segments, each a list of atoms.
    pub fn segments(&self) -> &[Vec<Atom>] {
        &self.segments
    }

    /// Placeholder names in order of appearance.
    pub fn placeholders(&self) -> impl Iterator<Item = &str> + '_ {
        self.segments.iter().flatten().filter_map(|a| match a {
            Atom::Placeholder(p) | Atom::HashTag(p) => Some(p.as_str()),
            Atom::Literal(_) => None,
        })
    }

    /// Whether the template has a placeholder called `name`.
    pub fn has_placeholder(&self, name: &str) -> bool {
        self.placeholders().any(|p| p == name)
    }

    /// Whether some values make `self` and `other` render the same key.
    pub fn overlaps(&self, other: &KeyTemplate) -> bool {
        templates_overlap(&self.source, &other.source)
    }

    /// Renders `{prefix}:{template}` with `values` in placeholder order.
    ///
    /// # Errors
    /// A wrong number of values, or a rejected value (empty, too long).
    pub fn render(&self, prefix: &KeyPrefix, values: &[&str]) -> Result<String, RenderError> {
        let expected = self.placeholders().count();
        if expected != values.len() {
            return Err(RenderError::Arity { template: self.source.clone(), expected, given: values.len() });
        }
        let mut out = String::with_capacity(prefix.as_str().len() + self.source.len() + 16);
        out.push_str(prefix.as_str());
        let mut next = values.iter();
        for (i, seg) in self.segments.iter().enumerate() {
            out.push(':');
            for (j, atom) in seg.iter().enumerate() {
                if j > 0 {
                    out.push('|');
                }
                match atom {
                    Atom::Literal(l) => out.push_str(l),
                    Atom::Placeholder(p) | Atom::HashTag(p) => {
                        let v = next.next().expect("arity checked");
                        let tag = matches!(atom, Atom::HashTag(_));
                        if tag {
                            out.push('{');
                        }
                        encode::encode_into(&mut out, v).map_err(|error| KeyError {
                            template: self.source.clone(),
                            placeholder: p.clone(),
                            error,
                        })?;
                        if tag {
                            out.push('}');
                        }
                    }
                }
            }
            let _ = i;
        }
        Ok(out)
    }

    /// Parses a concrete key back into its placeholder values (in placeholder
    /// order). `None` if the key does not belong to this family under `prefix`.
    pub fn parse_key(&self, prefix: &KeyPrefix, key: &str) -> Option<Vec<String>> {
        let rest = key.strip_prefix(prefix.as_str())?.strip_prefix(':')?;
        let mut values = Vec::new();
        let mut segs = rest.split(':');
        for seg in &self.segments {
            let text = segs.next()?;
            let mut parts = text.split('|');
            for atom in seg {
                let part = parts.next()?;
                match atom {
                    Atom::Literal(l) if l == part => {}
                    Atom::Literal(_) => return None,
                    Atom::Placeholder(_) => values.push(encode::decode(part)?.into_owned()),
                    Atom::HashTag(_) => {
                        let inner = part.strip_prefix('{')?.strip_suffix('}')?;
                        values.push(encode::decode(inner)?.into_owned());
                    }
                }
            }
            if parts.next().is_some() {
                return None;
            }
        }
        if segs.next().is_some() {
            return None;
        }
        Some(values)
    }

    /// A `SCAN ... MATCH` pattern for keys of this family. `values` gives, in
    /// placeholder order, a value to match exactly or `None` for any value.
    ///
    /// A `*` also matches `:`, so a pattern may match keys of other families
    /// (`joborder:*` matches `joborder:list:s1`); filter the results with
    /// [`KeyTemplate::parse_key`].
    ///
    /// # Errors
    /// A wrong number of values, or a rejected value.
    pub fn scan_pattern(&self, prefix: &KeyPrefix, values: &[Option<&str>]) -> Result<String, RenderError> {
        let expected = self.placeholders().count();
        if expected != values.len() {
            return Err(RenderError::Arity { template: self.source.clone(), expected, given: values.len() });
        }
        let mut out = String::new();
        encode::glob_escape_into(&mut out, prefix.as_str());
        let mut next = values.iter();
        for seg in &self.segments {
            out.push(':');
            for (j, atom) in seg.iter().enumerate() {
                if j > 0 {
                    out.push('|');
                }
                match atom {
                    Atom::Literal(l) => encode::glob_escape_into(&mut out, l),
                    Atom::HashTag(p) | Atom::Placeholder(p) => match next.next().expect("arity checked") {
                        None if matches!(atom, Atom::HashTag(_)) => out.push_str("{*}"),
                        None => out.push('*'),
                        Some(v) if matches!(atom, Atom::HashTag(_)) => {
                            let enc = encode::encode(v).map_err(|error| KeyError {
                                template: self.source.clone(),
                                placeholder: p.clone(),
                                error,
                            })?;
                            out.push('{');
                            encode::glob_escape_into(&mut out, &enc);
                            out.push('}');
                        }
                        Some(v) => {
                            let enc = encode::encode(v).map_err(|error| KeyError {
                                template: self.source.clone(),
                                placeholder: p.clone(),
                                error,
                            })?;
                            encode::glob_escape_into(&mut out, &enc);
                        }
                    },
                }
            }
        }
        Ok(out)
    }
}

fn parse_atom(atom: &str, range: Range<usize>, err: &mut impl FnMut(TemplateErrorKind, Range<usize>)) -> Option<Atom> {
    let bytes = atom.as_bytes();
    if let Some(open) = atom.find('{') {
        let Some(close_rel) = atom[open..].find('}') else {
            err(TemplateErrorKind::Unclosed, range.start + open..range.end);
            return None;
        };
        let close = open + close_rel;
        let inner = &atom[open + 1..close];
        let (tag, name) = match inner.strip_prefix('#') {
            Some(n) => (true, n),
            None => (false, inner),
        };
        if !is_identifier(name) {
            err(TemplateErrorKind::BadPlaceholderName(name.to_owned()), range.start + open..range.start + close + 1);
            return None;
        }
        if open != 0 || close + 1 != atom.len() {
            // Another convention's separator (`/`, `.`, `-`, `#`) next to a
            // placeholder: say how segments are separated here.
            let seps = ['/', '.', '-', '#', ';', ','];
            let kind = if atom.contains(seps) {
                TemplateErrorKind::GluedSeparator(name.to_owned(), atom.replace(seps, ":"))
            } else {
                TemplateErrorKind::Glued(name.to_owned())
            };
            err(kind, range);
            return None;
        }
        return Some(if tag { Atom::HashTag(name.to_owned()) } else { Atom::Placeholder(name.to_owned()) });
    }
    let mut ok = true;
    for (i, ch) in atom.char_indices() {
        if ch == '}' {
            err(TemplateErrorKind::StrayClose, range.start + i..range.start + i + 1);
            ok = false;
        } else if !ch.is_ascii() || !is_literal_byte(bytes[i]) {
            err(TemplateErrorKind::ForbiddenChar { ch }, range.start + i..range.start + i + ch.len_utf8());
            ok = false;
        }
    }
    ok.then(|| Atom::Literal(atom.to_owned()))
}

/// Whether two *valid* templates can render the same key for some values.
///
/// Both must have the same shape (segments and `|`-parts); where both have a
/// literal, the literals must be equal. A placeholder can render any literal
/// (literals only use characters that encode to themselves). A hash-tag
/// placeholder renders text in braces, which neither a literal nor a plain
/// placeholder can, so it only matches another hash tag. This is the one
/// implementation of the disjointness rule; it is `const` so a keyspace
/// declaration can be checked at compile time.
pub const fn templates_overlap(a: &str, b: &str) -> bool {
    let a = a.as_bytes();
    let b = b.as_bytes();
    let (mut i, mut j) = (0, 0);
    loop {
        let a_end = atom_end(a, i);
        let b_end = atom_end(b, j);
        let a_ph = a_end > i && a[i] == b'{';
        let b_ph = b_end > j && b[j] == b'{';
        let a_tag = a_ph && a_end > i + 1 && a[i + 1] == b'#';
        let b_tag = b_ph && b_end > j + 1 && b[j + 1] == b'#';
        if a_tag != b_tag {
            return false;
        }
        if !a_ph && !b_ph && !bytes_eq(a, i, a_end, b, j, b_end) {
            return false;
        }
        // Separators (or the end) must agree.
        let a_sep = if a_end < a.len() { a[a_end] } else { 0 };
        let b_sep = if b_end < b.len() { b[b_end] } else { 0 };
        if a_sep != b_sep {
            return false;
        }
        if a_sep == 0 {
            return true;
        }
        i = a_end + 1;
        j = b_end + 1;
    }
}

const fn atom_end(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i] != b':' && s[i] != b'|' {
        i += 1;
    }
    i
}

const fn bytes_eq(a: &[u8], ai: usize, ae: usize, b: &[u8], bi: usize, be: usize) -> bool {
    if ae - ai != be - bi {
        return false;
    }
    let mut k = 0;
    while k < ae - ai {
        if a[ai + k] != b[bi + k] {
            return false;
        }
        k += 1;
    }
    true
}

#[cfg(test)]
mod tests;
