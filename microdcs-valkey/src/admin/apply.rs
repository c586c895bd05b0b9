//! `migrate apply`: the backfills of the kinds with a building index, then
//! what is still flagged.

use super::kinds::Kinds;
use super::{Ran, render};
use crate::each::EachDocument;
use crate::error::Result;
use crate::store::{BackfillOptions, BackfillReport, IndexState, MaintenanceOptions, Report};

/// `migrate apply`, run under the migration lease by the caller.
pub(super) async fn apply<K: EachDocument>(kinds: &Kinds<K>, batch: usize, json: bool) -> Result<Ran> {
    // First the backfills: each kind with a building index is
    // written again through this build's scripts, online, so
    // its new indexes fill and become ready (see
    // `Store::backfill`); then the rebuilds of what is still
    // flagged.
    let mut backfilled: Vec<(&'static str, BackfillReport)> = Vec::new();
    for k in kinds.all() {
        if k.index_states().await?.iter().any(|(_, s)| *s == IndexState::Building) {
            let opts = BackfillOptions { page: batch, ..BackfillOptions::default() };
            backfilled.push((k.spec().kind, k.backfill(&opts).await?));
        }
    }
    // An index this run's backfill made ready (a kind of a
    // schema above 1) is complete and every live writer keeps
    // it: its layout is recorded, and it is not rebuilt. A
    // rebuild beside live writers (as in a rolling deploy) reads
    // a document and writes its entries later, so a write in
    // between would leave wrong entries in an index recorded
    // ready. One still building waits for the next apply. Any
    // other flagged index (the per-scope list, a kind of schema
    // 1, an index whose layout was never recorded) is rebuilt,
    // as before.
    let mut done: Vec<(&'static str, String, Report)> = Vec::new();
    let mut recorded: Vec<(&'static str, String)> = Vec::new();
    for k in kinds.all() {
        let kind = k.spec().kind;
        let states = k.index_states().await?;
        let made_ready = |index: &str| {
            k.spec().schema > 1 && backfilled.iter().any(|(b, r)| *b == kind && r.ready.iter().any(|i| i == index))
        };
        for index in k.needs_rebuild().await? {
            let state = states.iter().find(|(name, _)| *name == index).map(|(_, s)| s.clone());
            if made_ready(&index) {
                k.record_layout(&index).await?;
                recorded.push((kind, index.clone()));
            } else if state == Some(IndexState::Building) && k.spec().schema > 1 {
                // Left to the next apply's backfill.
            } else {
                let opts = MaintenanceOptions { index: Some(&index), batch, ..MaintenanceOptions::default() };
                let report = k.rebuild(&opts).await?;
                done.push((kind, index.clone(), report));
            }
        }
    }
    let left = kinds.flagged().await?;
    let building = kinds.building().await?;
    Ok(render::applied(&backfilled, &recorded, &done, &left, &building, json))
}
