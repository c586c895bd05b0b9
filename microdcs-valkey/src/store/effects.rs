//! Family effects of a step: counter and hash increments, set and sorted-set
//! adds and removes on the keyspace's declared families, applied by the
//! step's own script, so they happen exactly when the step writes (a retry
//! recognised by its operation id applies none of them again).

use crate::error::{Error, Result};
use crate::families::{CounterKey, EffectTarget, HashKey, SetKey, SortedSetKey};
use microdcs_schema::lua::{MAX_EFFECT_INTEGER_LEN, MAX_STEP_EFFECTS};

/// One effect: its operation, key and operands as the script reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FamilyEffect {
    pub(super) op: &'static str,
    pub(super) key: String,
    pub(super) a: String,
    pub(super) b: String,
    pub(super) ttl_ms: Option<u64>,
    /// The prefix of the handle the key came from.
    pub(super) prefix: String,
}

impl FamilyEffect {
    fn new(op: &'static str, t: EffectTarget, a: String, b: String) -> Self {
        FamilyEffect { op, key: t.key, a, b, ttl_ms: t.ttl_ms, prefix: t.prefix.as_str().to_owned() }
    }

    pub(super) fn incr(c: &CounterKey, n: i64) -> Self {
        Self::new("incr", c.effect_target(), n.to_string(), String::new())
    }

    pub(super) fn hincr(h: &HashKey, field: &str, n: i64) -> Self {
        Self::new("hincr", h.effect_target(), field.to_owned(), n.to_string())
    }

    pub(super) fn set(s: &SetKey, add: bool, member: &str) -> Self {
        Self::new(if add { "sadd" } else { "srem" }, s.effect_target(), member.to_owned(), String::new())
    }

    pub(super) fn zadd(z: &SortedSetKey, member: &str, score: f64) -> Self {
        Self::new("zadd", z.effect_target(), member.to_owned(), score.to_string())
    }

    pub(super) fn zrem(z: &SortedSetKey, member: &str) -> Self {
        Self::new("zrem", z.effect_target(), member.to_owned(), String::new())
    }
}

/// Checks a step's effects before anything is sent: how many, that each
/// key belongs to the store's keyspace (the prefix of its handle) and, on
/// a cluster or for a sharded type anywhere, to the slot of the document
/// (so a family a sharded keyspace forgot to tag is refused on one server
/// already, not first on a cluster), and that each operand is one the
/// script accepts.
pub(super) fn check(
    effects: &[FamilyEffect],
    valkey: &crate::client::Valkey,
    doc_key: &str,
    sharded: bool,
) -> Result<()> {
    if effects.len() > MAX_STEP_EFFECTS {
        return Err(Error::InvalidArgument(format!(
            "a step carries at most {MAX_STEP_EFFECTS} family effects, not {}",
            effects.len()
        )));
    }
    let doc_slot = microdcs_schema::slot::key_slot(doc_key.as_bytes());
    for e in effects {
        if e.prefix != valkey.prefix().as_str() {
            return Err(Error::InvalidArgument(format!(
                "the effect on `{}` comes from a handle with another key prefix than this store's",
                e.key
            )));
        }
        if (sharded || valkey.is_cluster()) && microdcs_schema::slot::key_slot(e.key.as_bytes()) != doc_slot {
            return Err(Error::InvalidArgument(format!(
                "the effect on `{}` is in another cluster slot than the document `{doc_key}`, so one script \
                 cannot write both; in a sharded keyspace give the family the scope as its tag (`{{#scope}}`)",
                e.key
            )));
        }
        let too_long = |n: &str| n.len() > MAX_EFFECT_INTEGER_LEN;
        match e.op {
            "incr" if too_long(&e.a) => return Err(out_of_range(&e.key, &e.a)),
            "hincr" if too_long(&e.b) => return Err(out_of_range(&e.key, &e.b)),
            "zadd" if !e.b.parse::<f64>().is_ok_and(f64::is_finite) => {
                return Err(Error::InvalidArgument(format!("the score of an effect on `{}` must be finite", e.key)));
            }
            _ => {}
        }
    }
    Ok(())
}

fn out_of_range(key: &str, n: &str) -> Error {
    Error::InvalidArgument(format!(
        "a step adds to `{key}` at most {MAX_EFFECT_INTEGER_LEN} characters of integer, not `{n}` (so no sum \
         can overflow halfway through the step)"
    ))
}
