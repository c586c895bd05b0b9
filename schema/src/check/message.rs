//! Text built in constant evaluation, for the keyspace check that
//! `keyspace!` runs at compile time.

use crate::spec::{Family, Role};

/// Room for a dozen problems of a keyspace, each naming two families with
/// their templates.
const CAPACITY: usize = 2048;

/// A message built at compile time (in a `const`), for keyspace checks that
/// run as constant evaluation. Holds up to [`ConstMessage::CAPACITY`] bytes;
/// longer text is cut at a whole-piece boundary and ends with `...`.
#[derive(Debug, Clone, Copy)]
pub struct ConstMessage {
    buf: [u8; CAPACITY],
    len: usize,
    full: bool,
}

impl ConstMessage {
    /// How many bytes a message holds.
    pub const CAPACITY: usize = CAPACITY;

    /// An empty message.
    pub const fn new() -> Self {
        ConstMessage { buf: [0; CAPACITY], len: 0, full: false }
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

    /// Appends `n` in decimal.
    pub const fn push_usize(self, n: usize) -> Self {
        // usize::MAX has 20 digits.
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        let mut rest = n;
        loop {
            start -= 1;
            digits[start] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        let (_, text) = digits.split_at(start);
        match core::str::from_utf8(text) {
            Ok(s) => self.push(s),
            Err(_) => self,
        }
    }

    /// Whether the text was cut because it did not fit.
    pub const fn is_cut(&self) -> bool {
        self.full
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

    /// Appends the description of a family (the one text used by both the
    /// compile-time and the run-time checks).
    /// Appends `template` with the scope as its hash tag: its `{scope}`
    /// written as `{#scope}`, or the tag added after its first segment
    /// (`jobresponse:byorder:{order}` -> `jobresponse:{#scope}:byorder:{order}`).
    /// The one rule for the fix the co-location errors name.
    pub(crate) const fn tagged(self, template: &str) -> Self {
        let (t, needle) = (template.as_bytes(), b"{scope}");
        let mut i = 0;
        while i + needle.len() <= t.len() {
            let mut j = 0;
            while j < needle.len() && t[i + j] == needle[j] {
                j += 1;
            }
            if j == needle.len() {
                let (head, tail) = template.split_at(i);
                let (_, rest) = tail.split_at(needle.len());
                return self.push(head).push(crate::spec::SCOPE_TAG).push(rest);
            }
            i += 1;
        }
        let mut k = 0;
        while k < t.len() && t[k] != b':' {
            k += 1;
        }
        let (head, rest) = template.split_at(k);
        self.push(head).push(":").push(crate::spec::SCOPE_TAG).push(rest)
    }

    /// Appends the overlap of `a` and `b` in words: both families, the rule,
    /// and a rewrite that ends it. The one text of the overlap error, in the
    /// derive's checks and in `keyspace!`'s constant alike.
    pub(crate) const fn overlap(self, a: &Family<'_>, b: &Family<'_>) -> Self {
        self.push("key families overlap: ")
            .family(a)
            .push(" and ")
            .family(b)
            .push(OVERLAP_RULE)
            .push(OVERLAP_FIX)
            .separated(rewritten(a, b))
            .push("`")
    }

    /// `f`'s template with a literal segment naming it (`list`, the index's
    /// or family's name) after its first segment: one segment more than
    /// every template it overlapped, so it overlaps none of them.
    pub(crate) const fn separated(self, f: &Family<'_>) -> Self {
        let word = match f.role {
            Role::Document => "doc",
            Role::List => "list",
            Role::Unique(_) | Role::Group(_) => f.name,
            Role::Declared(n) => n,
        };
        let t = f.key.as_bytes();
        let mut k = 0;
        while k < t.len() && t[k] != b':' {
            k += 1;
        }
        let (head, rest) = f.key.split_at(k);
        self.push(head).push(":").push(word).push(rest)
    }

    pub(crate) const fn family(self, f: &Family<'_>) -> Self {
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

/// Why two families overlap, after their names.
pub(crate) const OVERLAP_RULE: &str = " can render the same key (a placeholder takes any one segment, so templates \
     with as many segments meet wherever their literals agree)";

/// Before the rewrite an overlap error suggests.
pub(crate) const OVERLAP_FIX: &str = "; give one a segment of its own, e.g. `";

/// Which of two overlapping families the error suggests rewriting: not the
/// document key, which users name documents by.
pub(crate) const fn rewritten<'f, 'a>(a: &'f Family<'a>, b: &'f Family<'a>) -> &'f Family<'a> {
    if matches!(b.role, Role::Document) && !matches!(a.role, Role::Document) { a } else { b }
}

impl Default for ConstMessage {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::ConstMessage;

    #[test]
    fn numbers() {
        let m = ConstMessage::new().push_usize(0).push(" ").push_usize(42).push(" ").push_usize(usize::MAX);
        assert_eq!(m.as_str(), format!("0 42 {}", usize::MAX));
    }

    #[test]
    fn a_piece_that_does_not_fit_ends_the_text() {
        let fill = "x".repeat(ConstMessage::CAPACITY - 10);
        let m = ConstMessage::new().push(&fill).push("0123456789").push("a");
        assert_eq!(m.as_str(), format!("{fill}..."));
        assert!(m.is_cut());
    }
}
