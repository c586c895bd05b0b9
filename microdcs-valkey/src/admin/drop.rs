//! `migrate drop --lock FILE`: removes the keys of the indexes the committed
//! lock lists and this build no longer declares.
//!
//! The code of a release that dropped an index no longer knows its key
//! template; the lock written before the change does. Three guards keep the
//! removal from touching anything still in use:
//! - the kind's schema in this build is above the lock's, so writers of
//!   the release that kept the index are told apart (they announce the
//!   older schema);
//! - no writer of an older schema of the kind is live (it still keeps the
//!   index, and its queries read it);
//! - the dropped template overlaps no template of this build (document,
//!   index, stream, registry, family and built-in keys): a key one of
//!   those could name is never taken for an entry of the dropped index.
//!
//! Each key found by the walk is parsed back against the dropped template
//! before it is removed (a `SCAN` pattern's `*` also matches `:`). The
//! walk is page by page, at most `BackfillRate` keys a second, and starts
//! over on a second run, which then finds only what is left: idempotent.

use microdcs_schema::KeyTemplate;
use microdcs_schema::lock::Lock;
use serde_json::{Value, json};

use super::Ran;
use super::kinds::Kinds;
use super::render;
use crate::client::Valkey;
use crate::each::EachDocument;
use crate::error::{Error, Result};

/// One dropped index and what became of it.
#[derive(Debug)]
pub(super) struct Dropped {
    kind: String,
    index: String,
    /// Keys removed (0 when skipped).
    keys: u64,
    /// Why its keys were left, when they were.
    skipped: Option<String>,
}

/// The key template of an index from its layout text
/// (`layout-v1|<what>|<template>|...`).
fn layout_template(text: &str) -> Option<&str> {
    let mut parts = text.split('|');
    let (_version, _what) = (parts.next()?, parts.next()?);
    parts.next().filter(|t| !t.is_empty())
}

/// Every key template of this build: what a dropped template must not
/// overlap.
fn current_templates(code: &Lock) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in &code.kinds {
        out.push(k.key.clone());
        out.extend(k.changes.iter().cloned());
        out.push(k.nudge.clone());
        out.push(k.registry.clone());
        if let Some((stream, marker)) = &k.outbox {
            out.push(stream.clone());
            out.extend(marker.iter().cloned());
        }
        out.extend(k.indexes.iter().filter_map(|(_, t)| layout_template(t).map(str::to_owned)));
    }
    out.extend(code.families.iter().map(|f| f.key.clone()));
    out.extend(microdcs_schema::builtin::ALL.iter().map(|f| f.key.to_owned()));
    out
}

pub(super) async fn drop_indexes<K: EachDocument>(
    valkey: &Valkey,
    kinds: &Kinds<K>,
    lock_path: &std::path::Path,
    json_out: bool,
) -> Result<Ran> {
    let text = std::fs::read_to_string(lock_path)
        .map_err(|e| Error::InvalidArgument(format!("{}: {e}", lock_path.display())))?;
    let locked = Lock::parse(&text).map_err(|e| Error::InvalidArgument(format!("{}: {e}", lock_path.display())))?;
    if locked.keyspace != K::SPEC.name {
        return Err(Error::InvalidArgument(format!(
            "{} is the lock of keyspace `{}`, not `{}`",
            lock_path.display(),
            locked.keyspace,
            K::SPEC.name
        )));
    }
    let code = Lock::of(&K::SPEC);
    let ours: Vec<KeyTemplate> = current_templates(&code).iter().filter_map(|t| KeyTemplate::parse(t).ok()).collect();
    let mut out: Vec<Dropped> = Vec::new();
    for old in &locked.kinds {
        // A kind this build no longer has is the lock check's to report
        // (a breaking change); its keys are not this command's.
        let Some(new) = code.kinds.iter().find(|k| k.kind == old.kind) else { continue };
        for (index, layout) in &old.indexes {
            if new.indexes.iter().any(|(n, _)| n == index) {
                continue;
            }
            let mut d = Dropped { kind: old.kind.clone(), index: index.clone(), keys: 0, skipped: None };
            match guard(kinds, old, new, layout, &ours).await? {
                Err(why) => d.skipped = Some(why),
                Ok(template) => d.keys = remove(valkey, &template, json_out).await?,
            }
            out.push(d);
        }
    }
    Ok(dropped(&out, json_out))
}

/// The dropped index's template when every guard passes, else why not.
async fn guard<K: EachDocument>(
    kinds: &Kinds<K>,
    old: &microdcs_schema::lock::LockedKind,
    new: &microdcs_schema::lock::LockedKind,
    layout: &str,
    ours: &[KeyTemplate],
) -> Result<std::result::Result<KeyTemplate, String>> {
    let Some(template) = layout_template(layout).and_then(|t| KeyTemplate::parse(t).ok()) else {
        return Ok(Err(format!("the lock's layout `{layout}` names no key template this version reads")));
    };
    let (was, is) = (old.schema.unwrap_or(1), new.schema.unwrap_or(1));
    if is <= was {
        return Ok(Err(format!(
            "schema {is} is not above the lock's {was}: raise `schema` in the release that drops the index, so \
             the writers that still keep it are told apart"
        )));
    }
    let Some(kind) = kinds.all().find(|k| k.spec().kind == new.kind) else {
        return Ok(Err("the kind has no serde impls: no store of it is opened".to_owned()));
    };
    let writers = kind.writers().await?;
    if writers.older_remain() {
        return Ok(Err(
            "a writer of an older schema is live and keeps the index: stop it, wait `WriterLifetime`, run again"
                .to_owned(),
        ));
    }
    if let Some(other) = ours.iter().find(|t| t.overlaps(&template)) {
        return Ok(Err(format!(
            "`{}` can name the same keys as `{}` of this build: remove its keys by hand",
            template.as_str(),
            other.as_str()
        )));
    }
    Ok(Ok(template))
}

/// Walks the keyspace for keys of `template` and removes each one that
/// parses back as one; at most `BackfillRate` keys a second.
async fn remove(valkey: &Valkey, template: &KeyTemplate, json_out: bool) -> Result<u64> {
    let prefix = valkey.prefix();
    let values: Vec<Option<&str>> = template.placeholders().map(|_| None).collect();
    let pattern = template
        .scan_pattern(prefix, &values)
        .map_err(|e| Error::InvalidArgument(format!("`{}`: {e}", template.as_str())))?;
    let show = render::progress(json_out);
    let pace = crate::limits::Pace::new(valkey.write_options().backfill_rate);
    let mut removed = 0u64;
    let mut cursor = 0;
    loop {
        let (next, keys) = crate::retry::scan_step(valkey, cursor, &pattern, 500, "").await?;
        for key in keys.iter().filter(|k| template.parse_key(prefix, k).is_some()) {
            let mut cmd = redis::cmd("UNLINK");
            cmd.arg(key);
            let cmd = &cmd;
            // Removing a key twice is removing it once: a repeat is safe.
            let n: u64 = crate::retry::repeatable(valkey, "index key removal", key, |mut con| async move {
                cmd.query_async(&mut con).await
            })
            .await
            .map_err(|f| match f {
                crate::retry::Failure::Unknown { source, .. } | crate::retry::Failure::Failed(source) => {
                    Error::from_redis(source, key)
                }
            })?;
            removed += n;
            show(removed, 0);
            pace.after(removed).await;
        }
        if next == 0 {
            return Ok(removed);
        }
        cursor = next;
    }
}

/// `migrate drop`: exit 1 when the keys of a dropped index were left.
fn dropped(out: &[Dropped], json_out: bool) -> Ran {
    let code = u8::from(out.iter().any(|d| d.skipped.is_some()));
    if json_out {
        let v: Vec<Value> = out
            .iter()
            .map(|d| json!({ "kind": d.kind, "index": d.index, "keys": d.keys, "skipped": d.skipped }))
            .collect();
        return Ran { code, output: render::json(&json!({ "dropped": v })) };
    }
    let mut s = String::new();
    if out.is_empty() {
        s.push_str("no index of the lock is dropped by this build\n");
    }
    for d in out {
        match &d.skipped {
            None => s.push_str(&format!("dropped {} {}: {} keys removed\n", d.kind, d.index, d.keys)),
            Some(why) => s.push_str(&format!("kept the keys of {} {}: {why}\n", d.kind, d.index)),
        }
    }
    Ran { code, output: s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_is_the_third_part_of_a_layout() {
        let layout = "layout-v1|group|order:bycustomer:{scope}:{customer}|customer=field:customer|when=-|score=-|max=-|doc=order:{id}";
        assert_eq!(layout_template(layout), Some("order:bycustomer:{scope}:{customer}"));
        assert_eq!(layout_template("layout-v1|list|index:tasks|score=-|doc=tasks:{id}"), Some("index:tasks"));
        assert_eq!(layout_template("layout-v1|list"), None);
        assert_eq!(layout_template("layout-v1|list||x"), None);
    }
}
