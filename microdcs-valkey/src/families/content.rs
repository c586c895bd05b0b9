//! A content family (`sfc:recipe:{hash}`): texts stored under the SHA-256
//! of their bytes, so a reader can tell a text is the one it asked for.

use std::sync::LazyLock;

use microdcs_schema::KeyTemplate;
use sha2::{Digest, Sha256};

use crate::client::Valkey;
use crate::error::{Error, Result};
use crate::retry::{self, LuaScript};

/// A family of texts stored by content digest (its one placeholder is
/// `{hash}`, checked when `keyspace!` expands).
#[derive(Clone)]
pub struct ContentFamily {
    valkey: Valkey,
    template: KeyTemplate,
}

impl std::fmt::Debug for ContentFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentFamily").field("template", &self.template.to_string()).finish()
    }
}

/// The SHA-256 of `text` as 64 lower-case hex digits.
pub fn content_digest(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn valid_digest(d: &str) -> bool {
    d.len() == 64 && d.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl ContentFamily {
    #[doc(hidden)]
    pub fn from_template(valkey: Valkey, template: &'static str) -> Result<Self> {
        let template = KeyTemplate::parse(template)
            .map_err(|_| Error::InvalidArgument(format!("content template `{template}` does not parse")))?;
        Ok(ContentFamily { valkey, template })
    }

    fn key(&self, digest: &str) -> Result<String> {
        self.template.render(self.valkey.prefix(), &[digest]).map_err(crate::error::render_err)
    }

    /// Stores `text` under its digest, which it returns. Storing the same
    /// text again changes nothing (safe to repeat).
    ///
    /// # Errors
    /// Another text already stored under that digest ([`Error::Corrupt`]:
    /// it was tampered with; it is left as it is), a key of another type,
    /// connection errors ([`Error::UnknownOutcome`] after every attempt).
    pub async fn put(&self, text: &str) -> Result<String> {
        let digest = content_digest(text);
        let key = self.key(&digest)?;
        let call = PUT_SCRIPT.call().key(&key).arg(text.as_bytes());
        let v = retry::invoke_call(&self.valkey, &call, "content put", &key).await.map_err(|f| f.into_error(&key))?;
        match v.value {
            redis::Value::Int(1) => Ok(digest),
            _ => Err(Error::Corrupt { key, reason: "another text is stored under this digest".into() }),
        }
    }

    /// The text stored under `digest`, checked against it: `None` when
    /// there is none.
    ///
    /// # Errors
    /// A digest that is not 64 lower-case hex digits ([`Error::InvalidArgument`]),
    /// a stored text whose digest differs ([`Error::Corrupt`]), a key of
    /// another type, connection errors.
    pub async fn get(&self, digest: &str) -> Result<Option<String>> {
        if !valid_digest(digest) {
            return Err(Error::InvalidArgument(format!(
                "`{}` is not a SHA-256 digest (64 lower-case hex digits)",
                digest.chars().take(80).collect::<String>()
            )));
        }
        let key = self.key(digest)?;
        let raw: Option<Vec<u8>> = retry::read(&self.valkey, |mut con| {
            let key = &key;
            async move { redis::cmd("GET").arg(key).query_async(&mut con).await }
        })
        .await
        .map_err(|e| Error::from_redis(e, &key))?;
        let Some(raw) = raw else { return Ok(None) };
        let corrupt =
            || Error::Corrupt { key: key.clone(), reason: "the stored text does not match its digest".into() };
        let text = String::from_utf8(raw).map_err(|_| corrupt())?;
        if content_digest(&text) != digest {
            return Err(corrupt());
        }
        Ok(Some(text))
    }
}

static PUT_SCRIPT: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(PUT));

const PUT: &str = "\
-- KEYS[1] the text's key (named by its digest). ARGV[1] the text.
-- Returns 1 when the key holds the text (set now or before), 0 when it
-- holds another text (left alone); a key of another type is WRONGTYPE.
local held = redis.call('GET', KEYS[1])
if not held then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
if held == ARGV[1] then return 1 end
return 0
";

#[cfg(test)]
mod tests {
    #[test]
    fn digests_are_sha256_hex() {
        assert_eq!(super::content_digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert!(super::valid_digest(&super::content_digest("mix 5 min")));
        assert!(!super::valid_digest("E3B0"));
    }
}
