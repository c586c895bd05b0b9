//! What the poller keeps per consumer and scope between drains: the gaps
//! told (and those still to tell), and the pause after a failed batch.

use super::*;

impl Shared {
    /// Tells the consumer `plan` of a gap in `scope`'s stream `key`: logged,
    /// shown in health at once, counted once the consumer knows. Whether
    /// the drain may read past it (not when the consumer failed: it is told
    /// again after a pause).
    pub(super) async fn tell_gap(&self, plan: usize, scope: &str, key: &str, gap: &Gap) -> bool {
        let p = &self.plans[plan];
        tracing::error!(
            stream = key,
            group = p.consumer.group(),
            last_had = gap.last_had,
            first_gets = gap.first_gets.as_deref().unwrap_or(""),
            lost = gap.lost,
            "entries the consumer group had not read were trimmed from the stream"
        );
        self.health.gap(key, p.consumer.group(), gap);
        match p.consumer.gap(scope, gap).await {
            Ok(outcome) => {
                self.valkey.metrics().add_gap();
                self.valkey.metrics().add_entries_lost(gap.lost.unwrap_or(0));
                self.health.gap_told(key, p.consumer.group(), gap.lost, outcome == GapOutcome::Recovered);
                true
            }
            Err(e) => {
                let pause = self.failed(plan, scope);
                tracing::warn!(stream = key, error = %e, ?pause, "consumer failed on a gap; it is told again");
                false
            }
        }
    }

    /// Whether the consumer `plan` of `scope` is pausing after a failure.
    pub(super) fn paused(&self, plan: usize, scope: &str) -> bool {
        let failing = self.failing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        failing.get(&(plan, scope.to_owned())).is_some_and(|(until, _)| tokio::time::Instant::now() < *until)
    }

    /// Notes a failed batch; the pause before the next read.
    pub(super) fn failed(&self, plan: usize, scope: &str) -> Duration {
        let longest = usable(self.valkey.poll_options().poll_interval).max(FIRST_FAILURE_PAUSE);
        let mut failing = self.failing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let pause = failing
            .get(&(plan, scope.to_owned()))
            .map_or(FIRST_FAILURE_PAUSE, |(_, last)| last.saturating_mul(2))
            .min(longest);
        failing.insert((plan, scope.to_owned()), (tokio::time::Instant::now() + pause, pause));
        pause
    }

    pub(super) fn lock_untold(&self) -> std::sync::MutexGuard<'_, BTreeMap<(usize, String), Gap>> {
        self.untold.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Tells consumer `plan` the gap of `scope` no read finds again, if
    /// one waits; whether the drain may go on (not when the consumer
    /// failed: the gap stays, told again after the pause).
    pub(super) async fn tell_untold(&self, plan: usize, scope: &str, key: &str) -> bool {
        let Some(gap) = self.lock_untold().get(&(plan, scope.to_owned())).cloned() else { return true };
        if !self.tell_gap(plan, scope, key, &gap).await {
            return false;
        }
        self.lock_untold().remove(&(plan, scope.to_owned()));
        true
    }

    /// The gap told to consumer `plan` in `scope` and not yet read past;
    /// with `set`, first records (`Some(gap)`) or forgets (`None`) it.
    pub(super) fn told_gap(&self, plan: usize, scope: &str, set: Option<Option<Gap>>) -> Option<Gap> {
        let mut told = self.told.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (plan, scope.to_owned());
        match set {
            Some(Some(gap)) => {
                told.insert(key, gap.clone());
                Some(gap)
            }
            Some(None) => {
                told.remove(&key);
                None
            }
            None => told.get(&key).cloned(),
        }
    }

    /// Forgets the failures of a consumer that handled a batch.
    pub(super) fn recovered(&self, plan: usize, scope: &str) {
        let mut failing = self.failing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        failing.remove(&(plan, scope.to_owned()));
    }
}
