//! A channel family (`revocations:{scope}`): publish to everyone subscribed.

use super::Target;
use crate::error::Result;

/// One channel of a channel family.
#[derive(Debug, Clone)]
pub struct ChannelKey {
    pub(super) t: Target,
}

impl ChannelKey {
    /// The channel name.
    pub fn channel(&self) -> &str {
        &self.t.key
    }

    /// Publishes `message` (`PUBLISH`); how many subscribers received it.
    /// One attempt: after a lost answer it may or may not have been
    /// delivered, and a second attempt would deliver it twice.
    ///
    /// # Errors
    /// Connection errors (`is_unknown_outcome()` after a lost answer).
    pub async fn publish(&self, message: &str) -> Result<u64> {
        self.t.once(redis::cmd("PUBLISH").arg(&self.t.key).arg(message).clone()).await
    }
}
