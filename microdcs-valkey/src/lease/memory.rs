//! The in-memory twin of the lease store, for a single process and tests.

#[allow(clippy::wildcard_imports)]
use super::*;

#[derive(Debug, Clone)]
struct MemRecord {
    id: String,
    owner: String,
    token: u64,
    until: Instant,
}

#[derive(Debug, Default)]
struct MemState {
    records: HashMap<String, MemRecord>,
    fences: HashMap<String, u64>,
    data: HashMap<String, Vec<u8>>,
    requests: HashMap<(String, String), (String, Vec<String>, Instant)>,
}

/// [`LeaseBackend`] in memory, for a single process and tests; same
/// semantics as [`LeaseStore`], with the process clock. Its `Debug` shows
/// counts only (no owners or request ids).
#[derive(Default)]
pub struct MemoryLeases {
    state: Mutex<MemState>,
}

impl fmt::Debug for MemoryLeases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("MemoryLeases")
            .field("records", &st.records.len())
            .field("fences", &st.fences.len())
            .field("cached_requests", &st.requests.len())
            .finish_non_exhaustive()
    }
}

/// A lifetime as the server holds it: whole milliseconds, at least one.
fn held_ttl(ttl: Duration) -> Duration {
    Duration::from_millis(ms(ttl))
}

impl MemoryLeases {
    fn cached(
        &self,
        st: &mut MemState,
        name: &str,
        request_id: &str,
        fp: &str,
        now: Instant,
    ) -> Option<Result<Vec<String>>> {
        st.requests.retain(|_, (_, _, until)| *until > now);
        let (cfp, r, _) = st.requests.get(&(name.to_owned(), request_id.to_owned()))?;
        Some(if cfp == fp { Ok(r.clone()) } else { Err(conflict()) })
    }

    fn remember(st: &mut MemState, name: &str, request_id: &str, fp: String, r: &[String], now: Instant) {
        st.requests.insert((name.to_owned(), request_id.to_owned()), (fp, r.to_vec(), now + REQUEST_CACHE_TTL));
    }

    fn live(st: &MemState, name: &str, now: Instant) -> Option<MemRecord> {
        st.records.get(name).filter(|r| r.until > now).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Refuses a lease name a [`LeaseStore`] could not put in a key (empty, or
/// over 1024 bytes once encoded) with the same [`Error::Key`], so code
/// tested against the in-memory twin fails the same way on Valkey.
fn check_name(name: &str) -> Result<()> {
    use microdcs_schema::builtin;
    FamilyKey::builtin(builtin::LEASE).render(&crate::KeyPrefix::default(), &[name]).map(drop)
}

impl LeaseBackend for MemoryLeases {
    async fn acquire(&self, name: &str, owner: &str, ttl: Duration, request_id: &str) -> Result<Acquire> {
        check_request(request_id)?;
        check_name(name)?;
        let mut st = self.lock();
        let now = Instant::now();
        check_ttl(ttl)?;
        let fp = fingerprint("acquire", &[owner, &ms(ttl).to_string()]);
        let r = match self.cached(&mut st, name, request_id, &fp, now) {
            // A lease this request took, as it is now (as the script does).
            Some(Ok(r)) if r[0] == "acquired" => match Self::live(&st, name, now) {
                Some(rec) if rec.id == r[1] && rec.token.to_string() == r[2] => {
                    vec![r[0].clone(), r[1].clone(), r[2].clone(), (rec.until - now).as_millis().to_string()]
                }
                Some(rec) => vec!["held".into(), rec.owner, (rec.until - now).as_millis().to_string()],
                None => vec![r[0].clone(), r[1].clone(), r[2].clone(), "0".into()],
            },
            Some(r) => r?,
            None => {
                let r = match Self::live(&st, name, now) {
                    Some(rec) => vec!["held".into(), rec.owner, (rec.until - now).as_millis().to_string()],
                    None if st.fences.get(name).copied().unwrap_or(0) >= MAX_COUNTER => {
                        return Err(Error::LeaseCorrupt {
                            name: name.to_owned(),
                            reason: "the fence counter is at 2^53-1: no further token can be issued".into(),
                        });
                    }
                    None => {
                        let token = st.fences.get(name).copied().unwrap_or(0) + 1;
                        st.fences.insert(name.to_owned(), token);
                        let id = new_op_id();
                        st.records.insert(
                            name.to_owned(),
                            MemRecord { id: id.clone(), owner: owner.into(), token, until: now + held_ttl(ttl) },
                        );
                        vec!["acquired".into(), id, token.to_string(), ms(ttl).to_string()]
                    }
                };
                Self::remember(&mut st, name, request_id, fp, &r, now);
                r
            }
        };
        Ok(match r[0].as_str() {
            "acquired" => Acquire::Acquired(Lease {
                name: name.into(),
                id: r[1].clone(),
                owner: owner.into(),
                token: r[2].parse().unwrap_or(0),
                ttl: Duration::from_millis(r[3].parse().unwrap_or(0)),
            }),
            _ => Acquire::Held { owner: r[1].clone(), remaining: Duration::from_millis(r[2].parse().unwrap_or(0)) },
        })
    }

    async fn renew(&self, lease: &Lease, ttl: Duration, request_id: &str) -> Result<Duration> {
        check_request(request_id)?;
        check_name(&lease.name)?;
        let mut st = self.lock();
        let now = Instant::now();
        check_ttl(ttl)?;
        let fp = fingerprint("renew", &[&lease.id, &lease.owner, &lease.token.to_string(), &ms(ttl).to_string()]);
        let r = match self.cached(&mut st, &lease.name, request_id, &fp, now) {
            // A renewal, answered as the lease is now (as the script does).
            Some(Ok(r)) if r[0] == "renewed" => match Self::live(&st, &lease.name, now) {
                Some(rec) if rec.id == lease.id && rec.owner == lease.owner && rec.token == lease.token => {
                    vec![r[0].clone(), (rec.until - now).as_millis().to_string()]
                }
                _ => vec!["lost".to_owned()],
            },
            Some(r) => r?,
            None => {
                let r = match Self::live(&st, &lease.name, now) {
                    Some(rec) if rec.id == lease.id && rec.owner == lease.owner && rec.token == lease.token => {
                        if let Some(rec) = st.records.get_mut(&lease.name) {
                            rec.until = now + held_ttl(ttl);
                        }
                        vec!["renewed".to_owned(), ms(ttl).to_string()]
                    }
                    _ => vec!["lost".to_owned()],
                };
                Self::remember(&mut st, &lease.name, request_id, fp, &r, now);
                r
            }
        };
        if r[0] == "renewed" {
            Ok(Duration::from_millis(r[1].parse().unwrap_or(0)))
        } else {
            Err(Error::LeaseLost { name: lease.name.clone(), token: lease.token })
        }
    }

    async fn release(&self, lease: &Lease, request_id: &str) -> Result<()> {
        check_request(request_id)?;
        check_name(&lease.name)?;
        let mut st = self.lock();
        let now = Instant::now();
        let fp = fingerprint("release", &[&lease.id, &lease.owner, &lease.token.to_string()]);
        let r = match self.cached(&mut st, &lease.name, request_id, &fp, now) {
            Some(r) => r?,
            None => {
                let r = match Self::live(&st, &lease.name, now) {
                    Some(rec) if rec.id == lease.id && rec.owner == lease.owner && rec.token == lease.token => {
                        st.records.remove(&lease.name);
                        vec!["released".to_owned()]
                    }
                    _ => vec!["notheld".to_owned()],
                };
                Self::remember(&mut st, &lease.name, request_id, fp, &r, now);
                r
            }
        };
        if r[0] == "released" {
            Ok(())
        } else {
            Err(Error::LeaseNotHeld { name: lease.name.clone(), token: lease.token })
        }
    }

    async fn fenced_write(&self, name: &str, token: u64, value: &[u8]) -> Result<()> {
        check_token(token)?;
        check_name(name)?;
        let mut st = self.lock();
        let highest = st.fences.get(name).copied().unwrap_or(0);
        if token < highest {
            return Err(Error::Fenced { name: name.to_owned(), token, highest });
        }
        if token != highest || highest == 0 {
            return Err(unissued(name, token));
        }
        st.data.insert(name.to_owned(), value.to_vec());
        Ok(())
    }

    async fn read_protected(&self, name: &str) -> Result<Option<Vec<u8>>> {
        check_name(name)?;
        Ok(self.lock().data.get(name).cloned())
    }

    async fn fence(&self, name: &str) -> Result<u64> {
        check_name(name)?;
        Ok(self.lock().fences.get(name).copied().unwrap_or(0))
    }
}
