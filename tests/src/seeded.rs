//! Seeded randomness for the model and chaos tests: a failure prints its
//! seed, and the same seed replays the same run.

/// xorshift64*: small, deterministic, good enough to pick operations.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is taken as 1).
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True `pct` times in a hundred.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// The whole number in environment variable `name`, if set.
///
/// # Panics
/// When it is set to something that is not a whole number.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}
