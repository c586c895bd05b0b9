//! Codecs turn documents into the text stored in the `doc` field and back.

/// Encodes and decodes documents of type `D`. The text is stored as is.
pub trait Codec<D>: Send + Sync {
    /// The codec's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Document to text.
    ///
    /// # Errors
    /// The document cannot be encoded.
    fn encode(&self, doc: &D) -> Result<String, Self::Error>;

    /// Text to document.
    ///
    /// # Errors
    /// The text is not a valid document.
    fn decode(&self, text: &str) -> Result<D, Self::Error>;
}

/// The default codec: JSON through `serde_json`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl<D: serde::Serialize + serde::de::DeserializeOwned> Codec<D> for Json {
    type Error = serde_json::Error;

    fn encode(&self, doc: &D) -> Result<String, Self::Error> {
        serde_json::to_string(doc)
    }

    fn decode(&self, text: &str) -> Result<D, Self::Error> {
        serde_json::from_str(text)
    }
}
