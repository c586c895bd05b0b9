//! The periodic question to every Sentinel: what no switch announcement
//! or failed call tells (a replica added, a primary cut off from the
//! Sentinel listened to).

use std::sync::Weak;
use std::time::Duration;

use super::{Named, Sentinels, ask_one};

/// How often every Sentinel is asked again while nothing else asks them.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Asks every Sentinel every [`CHECK_EVERY`] (see [`Sentinels::check`]);
/// ends with the [`Sentinels`] it serves.
pub(super) async fn check_every(sentinels: Weak<Sentinels>) {
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        let Some(s) = sentinels.upgrade() else { return };
        s.check().await;
    }
}

impl Sentinels {
    /// Asks every Sentinel at once, each within its share of the connect
    /// timeout, and adopts what they name, oldest epoch first. Two things
    /// no switch announcement or failed call may ever tell: a replica
    /// added to the service (`every_replica()` waits for it from the next
    /// check on), and a primary the handle uses that was cut off from
    /// the Sentinels it listens to while the others promoted a replica
    /// (the newer epoch any of them names is followed, however the one
    /// asked first answers).
    async fn check(&self) {
        let n = self.setup.sentinels.len();
        let asked = futures_util::future::join_all((0..n).map(|i| ask_one(&self.setup, i))).await;
        let mut named: Vec<Named> = asked.into_iter().filter_map(Result::ok).collect();
        named.sort_by_key(|n| n.epoch);
        for n in &named {
            self.adopt(n, false, "named by a sentinel's periodic check");
        }
    }
}
