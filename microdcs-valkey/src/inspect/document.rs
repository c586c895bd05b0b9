//! The document view: one document as stored, with the state of each
//! index entry its stored fields call for (a list, unique, group or
//! multi-valued index), each read the way the store writes it.

use microdcs_schema::{DocumentSpec, IndexSpec, Keyspace};
use redis::Value;

use super::{DocumentView, EntryState, EntryView, Inspector, parse};
use crate::error::{Error, Result};
use crate::store::{Answer, answer, read_pipe, render_err, render_list};

impl<K: Keyspace> Inspector<K> {
    /// One document as stored, with the state of every index entry its
    /// stored fields call for. `None` when there is no such hash.
    ///
    /// # Errors
    /// An unknown kind, an invalid id, connection errors, a key of another type.
    pub async fn document(&self, kind: &str, id: &str) -> Result<Option<DocumentView>> {
        let spec = self.doc_spec(kind)?;
        if spec.ids_per_scope() {
            return Err(Error::InvalidArgument(format!(
                "kind `{kind}` names a document by its scope and id: use `document_in(kind, scope, id)`"
            )));
        }
        let key = parse(spec.key)?.render(self.valkey.prefix(), &[id]).map_err(render_err)?;
        self.document_at(spec, key, id).await
    }

    /// [`Inspector::document`] of document `id` in `scope`, for a kind whose
    /// ids are unique per scope (its key holds `{scope}`); for other kinds
    /// the document `id`, whatever its scope.
    ///
    /// # Errors
    /// As [`Inspector::document`].
    pub async fn document_in(&self, kind: &str, scope: &str, id: &str) -> Result<Option<DocumentView>> {
        let spec = self.doc_spec(kind)?;
        let t = parse(spec.key)?;
        let values: Vec<&str> = t.placeholders().map(|p| if p == "scope" { scope } else { id }).collect();
        let key = t.render(self.valkey.prefix(), &values).map_err(render_err)?;
        self.document_at(spec, key, id).await
    }

    async fn document_at(&self, spec: &DocumentSpec<'_>, key: String, id: &str) -> Result<Option<DocumentView>> {
        let map: std::collections::HashMap<String, Vec<u8>> =
            self.read(redis::cmd("HGETALL").arg(&key).clone(), &key).await?;
        if map.is_empty() {
            return Ok(None);
        }
        let texts: std::collections::HashMap<&str, String> =
            map.iter().map(|(k, v)| (k.as_str(), String::from_utf8_lossy(v).into_owned())).collect();
        let field = |f: &str| texts.get(f).map(String::as_str);
        let text = |f: &str| field(f).map(str::to_owned);
        let scope = spec.stored_scope(field("scope")).map(str::to_owned);
        let ops_text = text("ops").unwrap_or_default();
        let ops = if ops_text.is_ascii() && ops_text.len() % 12 == 0 {
            ops_text.as_bytes().chunks(12).map(|c| String::from_utf8_lossy(c).into_owned()).collect()
        } else {
            vec![ops_text]
        };
        let field_names = microdcs_schema::lua::all_index_fields(spec);
        let fields: Vec<(String, Option<String>)> = field_names.iter().map(|f| (f.clone(), text(f))).collect();
        let doc_text = text("doc");
        let document = doc_text
            .as_deref()
            .and_then(|t| crate::codec::with_id(t, spec.id_field, id))
            .and_then(|t| serde_json::from_str(&t).ok());
        let mut entries = Vec::new();
        if let Some(list) = spec.list {
            entries.push(self.list_entry(list, id, scope.as_deref(), text("score")).await?);
        }
        for ix in spec.unique {
            entries.push(self.index_entry(ix, true, id, scope.as_deref(), &field).await?);
        }
        for ix in spec.groups {
            if ix.kind().is_each() {
                entries.extend(self.each_entries(ix, id, scope.as_deref(), &field).await?);
            } else {
                entries.push(self.index_entry(ix, false, id, scope.as_deref(), &field).await?);
            }
        }
        let ttl_ms = self.ttl(&key).await?;
        Ok(Some(DocumentView {
            kind: spec.kind.to_owned(),
            id: id.to_owned(),
            key,
            version: text("v"),
            scope,
            ops,
            fields,
            text: if document.is_none() { doc_text } else { None },
            document,
            entries,
            ttl_ms,
        }))
    }

    async fn list_entry(
        &self,
        list: microdcs_schema::ListSpec<'_>,
        id: &str,
        scope: Option<&str>,
        stored_score: Option<String>,
    ) -> Result<EntryView> {
        let Some(scope) = scope else {
            return Ok(EntryView { index: "list".into(), key: None, state: EntryState::NotIndexed });
        };
        let key = match render_list(&parse(list.key)?, self.valkey.prefix(), scope) {
            Ok(k) => k,
            Err(e) => return Ok(unreadable("list", None, e.to_string())),
        };
        let state = if list.score.is_some() {
            match self.read::<Option<f64>>(redis::cmd("ZSCORE").arg(&key).arg(id).clone(), &key).await {
                Ok(None) => EntryState::Missing,
                Ok(Some(found)) => match stored_score.as_deref().map(str::parse::<f64>) {
                    Some(Ok(s)) if s == found => EntryState::Present,
                    Some(_) => EntryState::OtherScore { expected: stored_score.unwrap_or_default(), found },
                    None => EntryState::Present,
                },
                Err(Error::WrongType { detail, .. }) => EntryState::Unreadable { reason: detail },
                Err(e) => return Err(e),
            }
        } else {
            self.membership(&key, id).await?
        };
        Ok(EntryView { index: "list".into(), key: Some(key), state })
    }

    async fn membership(&self, key: &str, id: &str) -> Result<EntryState> {
        Ok(match self.read::<bool>(redis::cmd("SISMEMBER").arg(key).arg(id).clone(), key).await {
            Ok(true) => EntryState::Present,
            Ok(false) => EntryState::Missing,
            Err(Error::WrongType { detail, .. }) => EntryState::Unreadable { reason: detail },
            Err(e) => return Err(e),
        })
    }

    /// The entries of a multi-valued index: one per value its hash field
    /// keeps (the store's rule), each with its membership.
    async fn each_entries<'v>(
        &self,
        ix: &IndexSpec<'_>,
        id: &'v str,
        scope: Option<&'v str>,
        stored: &impl Fn(&str) -> Option<&'v str>,
    ) -> Result<Vec<EntryView>> {
        let t = parse(ix.key)?;
        let keys =
            match microdcs_schema::stored_entry_keys(ix, &t, self.valkey.prefix(), id, scope.unwrap_or(""), stored) {
                Ok(keys) if keys.is_empty() => {
                    return Ok(vec![EntryView { index: ix.name.into(), key: None, state: EntryState::NotIndexed }]);
                }
                Ok(keys) => keys,
                Err(e) => return Ok(vec![unreadable(ix.name, None, e.to_string())]),
            };
        // Every value's set in one pipeline (split by slot on a cluster):
        // a document may have up to `MAX_EACH_VALUES` of them.
        let mut p = redis::pipe();
        p.ignore_errors();
        for key in &keys {
            p.cmd("SISMEMBER").arg(key).arg(id);
        }
        let replies: Vec<Value> = read_pipe(&self.valkey, &p, &keys[0]).await?;
        let mut out = Vec::with_capacity(keys.len());
        for (key, reply) in keys.into_iter().zip(replies) {
            let state = match answer(&reply)? {
                // The server's own refusal, as a single-valued entry reports it.
                Answer::WrongType(reason) => EntryState::Unreadable { reason },
                Answer::Reply(v) => {
                    if redis::from_redis_value_ref::<bool>(v).map_err(|e| Error::from_redis(e.into(), &key))? {
                        EntryState::Present
                    } else {
                        EntryState::Missing
                    }
                }
            };
            out.push(EntryView { index: ix.name.into(), key: Some(key), state });
        }
        Ok(out)
    }

    async fn index_entry<'v>(
        &self,
        ix: &IndexSpec<'_>,
        unique: bool,
        id: &'v str,
        scope: Option<&'v str>,
        stored: &impl Fn(&str) -> Option<&'v str>,
    ) -> Result<EntryView> {
        let t = parse(ix.key)?;
        // The same rule as the store's writes: which entry the stored
        // fields (and a member's or sorted entry's marker) call for.
        let key = match microdcs_schema::stored_entry_key(ix, &t, self.valkey.prefix(), id, scope.unwrap_or(""), stored)
        {
            Ok(Some(k)) => k,
            Ok(None) => return Ok(EntryView { index: ix.name.into(), key: None, state: EntryState::NotIndexed }),
            Err(e) => return Ok(unreadable(ix.name, None, e.to_string())),
        };
        let state = if unique {
            match self.read::<Option<String>>(redis::cmd("GET").arg(&key).clone(), &key).await {
                Ok(None) => EntryState::Missing,
                Ok(Some(h)) if h == id => EntryState::Present,
                Ok(Some(holder)) => EntryState::OtherHolder { holder },
                Err(Error::WrongType { detail, .. }) => EntryState::Unreadable { reason: detail },
                Err(e) => return Err(e),
            }
        } else if ix.kind().is_sorted() {
            // A sorted index: the hash keeps the score in the field named
            // after the index.
            let stored_score = stored(ix.name).map(str::to_owned);
            match self.read::<Option<f64>>(redis::cmd("ZSCORE").arg(&key).arg(id).clone(), &key).await {
                Ok(None) => EntryState::Missing,
                Ok(Some(found)) => match stored_score.as_deref().map(str::parse::<f64>) {
                    Some(Ok(s)) if s == found => EntryState::Present,
                    _ => EntryState::OtherScore { expected: stored_score.unwrap_or_default(), found },
                },
                Err(Error::WrongType { detail, .. }) => EntryState::Unreadable { reason: detail },
                Err(e) => return Err(e),
            }
        } else {
            self.membership(&key, id).await?
        };
        Ok(EntryView { index: ix.name.into(), key: Some(key), state })
    }
}

fn unreadable(index: &str, key: Option<String>, reason: String) -> EntryView {
    EntryView { index: index.to_owned(), key, state: EntryState::Unreadable { reason } }
}
