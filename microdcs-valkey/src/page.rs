//! Pages of ids: where a walk over a set or a sorted set stands, bound to
//! the key it walks, and its text form (a token another process can resume
//! from, or an HTTP page token).
//!
//! A continuation names its walk by a digest of the key, so a page handed
//! to the walk of another key is refused instead of silently continuing the
//! wrong walk (or restarting this one). A token carries a checksum, so a
//! damaged token (cut, mistyped) is refused. It is not signed: anyone can
//! write a token that passes the checksum, so what it carries is never
//! trusted as data. Its walk must still be the walk it is handed to, and
//! ids it says were scanned but not yet returned are checked against the
//! set before they are handed out; a forged token can at most move a walk
//! to another position in the same set.

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// A page request: the first page ([`Page::first`]) or the continuation
/// an [`IdPage`] hands back. A page holds at most `count` ids.
///
/// Sorted lists continue after the last (score, id) returned, not at a rank
/// offset, so ids inserted or removed meanwhile never make an id that
/// existed before the first page repeat or be skipped. Sets (plain lists,
/// group indexes) continue an `SSCAN`: every id present for the whole walk
/// is returned, never twice within a page, and exactly once unless the set
/// is resized (rehashed) during the walk, when the server may hand an id
/// out again on a later page; one added or removed meanwhile may or may
/// not be returned.
///
/// A sorted walk goes lowest score first from [`Page::first`], highest
/// first from [`Page::first_descending`] (the newest first, on a list
/// scored by time); a continuation keeps its walk's direction, with the
/// same guarantees either way. A set has no order: a descending page handed
/// to a set's walk is refused.
///
/// A continuation belongs to the walk that returned it (the same index,
/// values and scope): handed to another walk it is refused
/// ([`Error::InvalidArgument`]). [`Page::to_token`] and [`Page::from_token`]
/// give it a stable text form, for resuming in another process or as an
/// HTTP page token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub(crate) count: usize,
    pub(crate) at: PageAt,
    /// The walk a continuation belongs to: a digest of the key it walks
    /// (`None` for a first page, which may start any walk).
    walk: Option<String>,
    /// Highest score first (sorted walks only).
    pub(crate) descending: bool,
    /// Read from a token: the ids it carries are checked before use.
    from_token: bool,
}

/// Where a page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PageAt {
    /// The beginning.
    Start,
    /// An `SSCAN` cursor and ids already scanned but not yet returned.
    Scan { cursor: u64, pending: Vec<String> },
    /// After this (score, id) of a sorted set, in the walk's direction; the
    /// score as the server wrote it.
    After { score: String, id: String },
}

/// A page of ids and the request for the next one (`None` at the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdPage {
    /// Ids in this page: at most the count asked for.
    pub ids: Vec<String>,
    /// The next page, if there is one.
    pub next: Option<Page>,
}

/// What every token starts with: the format and its version.
const TOKEN_TAG: &str = "mdcp1";
impl Page {
    /// The longest token [`Page::from_token`] reads (a page carries at most
    /// its count of ids, each a key segment).
    pub const MAX_TOKEN_LEN: usize = 1 << 20;

    /// The largest page: a larger count is taken as this one.
    pub const MAX: usize = 100_000;

    /// The first page of at most `count` ids (at least 1, at most
    /// [`Page::MAX`]).
    pub fn first(count: usize) -> Self {
        Page { count: count.clamp(1, Self::MAX), at: PageAt::Start, walk: None, descending: false, from_token: false }
    }

    /// The first page of a sorted walk from the highest score down, of at
    /// most `count` ids (at least 1, at most [`Page::MAX`]). A set's walk
    /// (a plain list, a plain group index) refuses it: a set has no order.
    pub fn first_descending(count: usize) -> Self {
        Page { descending: true, ..Self::first(count) }
    }

    /// Whether the walk goes from the highest score down.
    pub fn is_descending(&self) -> bool {
        self.descending
    }

    /// The page size.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The continuation of the walk over `key` at `at`, in the direction of
    /// `self`, the page that led there.
    pub(crate) fn next_of(&self, key: &str, at: PageAt) -> Self {
        Page { count: self.count, at, walk: Some(walk_digest(key)), descending: self.descending, from_token: false }
    }

    /// Refuses a continuation of another walk than the one over `key`.
    pub(crate) fn check_walk(&self, key: &str) -> Result<()> {
        match &self.walk {
            Some(w) if *w != walk_digest(key) => Err(Error::InvalidArgument(
                "this page continues another walk (another index, values, scope or list): \
                 pass it back to the call that returned it, or start with Page::first"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// Whether the page came from a token, so the ids it carries must be
    /// checked before they are returned.
    pub(crate) fn is_from_token(&self) -> bool {
        self.from_token
    }

    /// The page as text: letters, digits, `.`, `-` and `_` only (safe in a
    /// URL), the same for the same page in every process and release of
    /// this format. Read back with [`Page::from_token`].
    pub fn to_token(&self) -> String {
        let mut fields = vec![self.count.to_string(), self.walk.clone().unwrap_or_default()];
        // Ascending positions keep the letters of the first format, so every
        // token written before descending walks existed still reads.
        match &self.at {
            PageAt::Start => fields.push(if self.descending { "r" } else { "s" }.into()),
            PageAt::Scan { cursor, pending } => {
                fields.push("c".into());
                fields.push(cursor.to_string());
                fields.extend(pending.iter().map(|id| hex(id.as_bytes())));
            }
            PageAt::After { score, id } => {
                fields.push(if self.descending { "b" } else { "a" }.into());
                fields.push(hex(score.as_bytes()));
                fields.push(hex(id.as_bytes()));
            }
        }
        let body = fields.join(".");
        format!("{TOKEN_TAG}.{}.{body}", checksum(&body))
    }

    /// A page from its [`Page::to_token`] text.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a token that is not one of ours, is
    /// damaged (its checksum fails: the checksum catches damage, not a
    /// forgery, see the type's docs), or is over [`Page::MAX_TOKEN_LEN`].
    pub fn from_token(token: &str) -> Result<Self> {
        let bad = |why: &str| Error::InvalidArgument(format!("not a page token: {why}"));
        if token.len() > Self::MAX_TOKEN_LEN {
            return Err(bad("too long"));
        }
        let rest = token.strip_prefix(TOKEN_TAG).and_then(|r| r.strip_prefix('.')).ok_or_else(|| bad("no tag"))?;
        let (sum, body) = rest.split_once('.').ok_or_else(|| bad("no checksum"))?;
        if sum != checksum(body) {
            return Err(bad("checksum mismatch (damaged or edited)"));
        }
        let mut f = body.split('.');
        let count: usize = f.next().and_then(|c| c.parse().ok()).ok_or_else(|| bad("count"))?;
        if count == 0 || count > Self::MAX {
            return Err(bad("count out of range"));
        }
        let walk = f.next().ok_or_else(|| bad("walk"))?;
        if !walk.is_empty() && (walk.len() != 16 || !walk.bytes().all(|b| b.is_ascii_hexdigit())) {
            return Err(bad("walk"));
        }
        let text = |h: Option<&str>| h.and_then(unhex).ok_or_else(|| bad("field encoding"));
        let position = f.next();
        let descending = matches!(position, Some("r" | "b"));
        let at = match position {
            Some("s" | "r") => PageAt::Start,
            Some("c") => {
                let cursor = f.next().and_then(|c| c.parse().ok()).ok_or_else(|| bad("cursor"))?;
                let mut pending = f.by_ref().map(|h| text(Some(h))).collect::<Result<Vec<_>>>()?;
                if pending.len() > Self::MAX {
                    return Err(bad("more carried ids than a page holds"));
                }
                // A page never hands out an id twice.
                let mut seen = std::collections::HashSet::new();
                pending.retain(|id| seen.insert(id.clone()));
                PageAt::Scan { cursor, pending }
            }
            Some("a" | "b") => {
                let score = text(f.next())?;
                // A score the server keeps: a number or an infinity, never NaN.
                if !score.parse::<f64>().is_ok_and(|x| !x.is_nan()) {
                    return Err(bad("score"));
                }
                PageAt::After { score, id: text(f.next())? }
            }
            _ => return Err(bad("position")),
        };
        if f.next().is_some() {
            return Err(bad("trailing fields"));
        }
        if matches!(at, PageAt::Start) != walk.is_empty() {
            return Err(bad("a first page has no walk, a continuation has one"));
        }
        Ok(Page { count, at, walk: (!walk.is_empty()).then(|| walk.to_owned()), descending, from_token: true })
    }
}

impl std::fmt::Display for Page {
    /// The token ([`Page::to_token`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_token())
    }
}

impl std::str::FromStr for Page {
    type Err = Error;

    /// [`Page::from_token`].
    fn from_str(s: &str) -> Result<Self> {
        Page::from_token(s)
    }
}

/// One page of a set's members by `SSCAN` (see [`Page`] for what a walk
/// over pages returns); one attempt, for a caller's bounded read.
pub(crate) async fn sscan_page(valkey: &crate::client::Valkey, key: &str, page: Page) -> Result<IdPage> {
    page.check_walk(key)?;
    if page.descending {
        return Err(Error::InvalidArgument(
            "a set has no order: descending pages walk sorted lists and sorted indexes only".into(),
        ));
    }
    let count = page.count.max(1);
    let mut started = !matches!(page.at, PageAt::Start);
    let from_token = page.is_from_token();
    let (mut cursor, mut ids) = match page.at.clone() {
        PageAt::Scan { cursor, pending } => (cursor, pending),
        // A sorted set's position handed to a set's walk: refused, not
        // taken as a fresh start.
        PageAt::After { .. } => {
            return Err(Error::InvalidArgument("a sorted walk's page handed to a set's walk".into()));
        }
        PageAt::Start => (0, Vec::new()),
    };
    let mut con = valkey.connection();
    if from_token && !ids.is_empty() {
        // A token is not signed: the ids it says were scanned are handed
        // out only while they are members.
        let member: Vec<bool> = redis::cmd("SMISMEMBER")
            .arg(key)
            .arg(&ids)
            .query_async(&mut con)
            .await
            .map_err(|e| Error::from_redis(e, key))?;
        let mut keep = member.into_iter();
        ids.retain(|_| keep.next().unwrap_or(false));
    }
    // SSCAN's COUNT is a hint: scan until the page is full or the walk
    // ends, and carry what does not fit over to the next page.
    // Ids in this page and the carried-over rest, for a linear dedupe.
    let mut seen: std::collections::HashSet<String> = ids.iter().cloned().collect();
    while ids.len() < count && !(started && cursor == 0) {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SSCAN")
            .arg(key)
            .arg(cursor)
            .arg("COUNT")
            .arg(count)
            .query_async(&mut con)
            .await
            .map_err(|e| Error::from_redis(e, key))?;
        started = true;
        cursor = next;
        for id in batch {
            if seen.insert(id.clone()) {
                ids.push(id);
            }
        }
    }
    let pending = if ids.len() > count { ids.split_off(count) } else { Vec::new() };
    let next = (cursor != 0 || !pending.is_empty()).then(|| page.next_of(key, PageAt::Scan { cursor, pending }));
    Ok(IdPage { ids, next })
}

/// A member of a sorted set and its score: what sorted-set handles and
/// [`Store::range`](crate::Store::range) return.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// The member (an id, for a document index).
    pub member: String,
    /// Its score.
    pub score: f64,
}

impl Scored {
    /// Pairs as `ZRANGE ... WITHSCORES` returns them.
    pub(crate) fn pairs(flat: Vec<(String, f64)>) -> Vec<Scored> {
        flat.into_iter().map(|(member, score)| Scored { member, score }).collect()
    }
}

/// A score bound as `ZRANGE ... BYSCORE` takes it (`+inf`, `-inf`, or the
/// number).
pub(crate) fn score_bound(x: f64) -> String {
    if x == f64::INFINITY {
        "+inf".to_owned()
    } else if x == f64::NEG_INFINITY {
        "-inf".to_owned()
    } else {
        x.to_string()
    }
}

/// The walk of `key`: the first 8 bytes of its SHA-256, in hex (the key
/// itself stays out of tokens).
fn walk_digest(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes())[..8])
}

fn checksum(body: &str) -> String {
    hex(&Sha256::digest(body.as_bytes())[..6])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(h: &str) -> Option<String> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..h.len()).step_by(2).map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok()
}

impl crate::observe::Outcome for IdPage {
    fn outcome(&self) -> &'static str {
        "ok"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_are_pinned() {
        let first = Page::first(10);
        // Pinned (computed independently): tokens cross processes and releases.
        assert_eq!(first.to_token(), "mdcp1.aefd15218beb.10..s");
        let scan = Page::first(10)
            .next_of("p:job:bystatus:s1:queued", PageAt::Scan { cursor: 42, pending: vec!["j-1".into()] });
        let after = Page::first(5).next_of("p:job:list:s1", PageAt::After { score: "1.5".into(), id: "a.b".into() });
        assert_eq!(after.to_token(), "mdcp1.e006b7a8a4cc.5.8ff6e80ea0769420.a.312e35.612e62");
        let down = Page::first_descending(10);
        assert_eq!(down.to_token(), "mdcp1.a0da6a42c052.10..r");
        let down_after =
            Page::first_descending(5).next_of("p:job:list:s1", PageAt::After { score: "1.5".into(), id: "a.b".into() });
        assert_eq!(down_after.to_token(), "mdcp1.c536a6f6df9f.5.8ff6e80ea0769420.b.312e35.612e62");
        for p in [first, scan, after, down, down_after] {
            let t = p.to_token();
            assert!(t.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)), "{t}");
            let back = Page::from_token(&t).unwrap();
            assert_eq!((back.count, &back.at, &back.walk, back.descending), (p.count, &p.at, &p.walk, p.descending));
            assert!(back.is_from_token());
            assert_eq!(t.parse::<Page>().unwrap(), back);
        }
    }

    #[test]
    fn a_token_whose_score_is_not_a_number_is_refused() {
        for score in ["NaN", "nan", "1.5x"] {
            let t = Page::first(5).next_of("k", PageAt::After { score: score.into(), id: "a".into() }).to_token();
            assert!(matches!(Page::from_token(&t), Err(Error::InvalidArgument(_))), "{score}");
        }
        for score in ["inf", "-inf", "1e300", "-0"] {
            let t = Page::first(5).next_of("k", PageAt::After { score: score.into(), id: "a".into() }).to_token();
            assert!(Page::from_token(&t).is_ok(), "{score}");
        }
    }

    #[test]
    fn a_damaged_or_foreign_token_is_refused() {
        let t = Page::first(10).next_of("k", PageAt::Scan { cursor: 7, pending: vec![] }).to_token();
        let edited = t.replace(".7", ".8");
        assert_ne!(edited, t);
        for bad in [edited.as_str(), "", "mdcp1", "mdcp2.x.y", &t[..t.len() - 1], "mdcp1.000000000000.10..s"] {
            assert!(matches!(Page::from_token(bad), Err(Error::InvalidArgument(_))), "{bad:?}");
        }
        assert!(Page::from_token(&"a".repeat(Page::MAX_TOKEN_LEN + 1)).is_err());
    }

    #[test]
    fn a_continuation_belongs_to_its_walk() {
        let p = Page::first(10).next_of("k1", PageAt::Scan { cursor: 7, pending: vec![] });
        assert!(p.check_walk("k1").is_ok());
        assert!(matches!(p.check_walk("k2"), Err(Error::InvalidArgument(_))));
        assert!(Page::first(3).check_walk("anything").is_ok());
    }
}
