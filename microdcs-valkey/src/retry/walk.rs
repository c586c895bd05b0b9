//! Keyspace walks (`SCAN`): on one server the server's walk, on a cluster
//! the island's primary or, for keyspaces sharded by scope, every primary
//! in turn.

use redis::Value;

use super::{read, read_cmd};
use crate::client::Valkey;

/// Bits of a walk's cursor that hold a node's own `SCAN` cursor, on a
/// cluster walked primary by primary; the bits above hold the slot that
/// names the primary. A node's cursor counts its hash table's buckets
/// (at most some 2^40 however large the node), so 50 bits hold it.
const NODE_CURSOR_BITS: u32 = 50;

/// One keyspace walk step, `SCAN cursor MATCH pattern COUNT count TYPE ty`
/// (no `TYPE` when `ty` is empty),
/// bounded by [`read`]'s rule: the next cursor (0 at the end) and the keys.
///
/// On one server, the server's walk. On a cluster each node walks only its
/// own keys: an island (a tagged prefix) lives on the primary of its slot,
/// so the walk goes there; a keyspace sharded by scope (no tag) lives on
/// every primary, so the walk visits them in turn, in the order of the
/// first slot each serves. Its cursor then carries that slot (above
/// [`NODE_CURSOR_BITS`]) and the node's cursor (below), so a walk resumes
/// on the primary that serves the slot now, after a failover too (the
/// node's cursor may then repeat or miss keys, as after any move: run a
/// walk again after one).
pub(crate) async fn scan_step(
    valkey: &Valkey,
    cursor: u64,
    pattern: &str,
    count: usize,
    ty: &str,
) -> crate::Result<(u64, Vec<String>)> {
    let scan = |at: u64| {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(at).arg("MATCH").arg(pattern).arg("COUNT").arg(count);
        if !ty.is_empty() {
            cmd.arg("TYPE").arg(ty);
        }
        cmd
    };
    let slot = valkey.prefix().slot();
    if slot.is_some() || !valkey.is_cluster() {
        let cmd = scan(cursor);
        return read(valkey, |mut con| {
            let cmd = cmd.clone();
            async move { con.query_near(&cmd, slot).await }
        })
        .await
        .map_err(|e| crate::Error::from_redis(e, pattern));
    }
    let firsts = primary_first_slots(valkey).await?;
    let node_slot = u16::try_from(cursor >> NODE_CURSOR_BITS)
        .ok()
        .filter(|s| *s < microdcs_schema::slot::SLOTS)
        .ok_or_else(|| crate::Error::InvalidArgument(format!("{cursor} is no cursor of a walk over this cluster")))?;
    let node_cursor = cursor & ((1 << NODE_CURSOR_BITS) - 1);
    let cmd = scan(node_cursor);
    let (next, keys): (u64, Vec<String>) = read(valkey, |mut con| {
        let cmd = cmd.clone();
        async move { con.query_on_slot(&cmd, node_slot).await }
    })
    .await
    .map_err(|e| crate::Error::from_redis(e, pattern))?;
    if next >> NODE_CURSOR_BITS != 0 {
        return Err(crate::Error::Protocol { script: "SCAN", reply: format!("a cursor over 2^50: {next}") });
    }
    let after = if next != 0 {
        (u64::from(node_slot) << NODE_CURSOR_BITS) | next
    } else {
        // This primary is done: the next one, or the end of the walk.
        firsts.iter().find(|s| **s > node_slot).map_or(0, |s| u64::from(*s) << NODE_CURSOR_BITS)
    };
    Ok((after, keys))
}

/// The lowest slot each primary of the cluster serves, in order
/// (`CLUSTER SLOTS`), bounded like a read.
async fn primary_first_slots(valkey: &Valkey) -> crate::Result<Vec<u16>> {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SLOTS");
    let ranges: Value = read_cmd(valkey, &cmd, "CLUSTER SLOTS").await?;
    let bad = || crate::Error::Protocol { script: "CLUSTER SLOTS", reply: "not a list of slot ranges".into() };
    let Value::Array(ranges) = ranges else { return Err(bad()) };
    let mut first: std::collections::BTreeMap<Vec<u8>, u16> = std::collections::BTreeMap::new();
    for range in ranges {
        let Value::Array(parts) = range else { return Err(bad()) };
        let (Some(Value::Int(start)), Some(Value::Array(primary))) = (parts.first(), parts.get(2)) else {
            return Err(bad());
        };
        // A primary is known by its address and id (the third field).
        let node: Vec<u8> = primary
            .iter()
            .take(3)
            .flat_map(|v| match v {
                Value::BulkString(b) => b.clone(),
                Value::Int(i) => i.to_string().into_bytes(),
                _ => Vec::new(),
            })
            .collect();
        let start = u16::try_from(*start).map_err(|_| bad())?;
        first.entry(node).and_modify(|s| *s = (*s).min(start)).or_insert(start);
    }
    let mut slots: Vec<u16> = first.into_values().collect();
    slots.sort_unstable();
    Ok(slots)
}
