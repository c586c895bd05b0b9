//! Document types shared by the integration tests: the seed's job response
//! (sorted-set list, unique by-order index, group by-state index) and work
//! master (plain-set list).

use microdcs_valkey::Document;
use serde::{Deserialize, Serialize};

/// A job response with every index kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "jobresponse",
    key = "jobresponse:{id}",
    list(key = "jobresponse:list:{scope}", score = start_time),
    unique(key = "jobresponse:byorder:{order}", order = job_order_id),
    group(key = "jobresponse:bystate:{scope}:{state}", state = normalized_state())
)]
pub struct JobResponse {
    /// Id.
    pub id: String,
    /// Scope.
    pub scope: String,
    /// The job order (unique index).
    pub job_order_id: String,
    /// Start time (list score).
    pub start_time: i64,
    /// State texts (group index, joined with `_`; empty: not indexed).
    pub state: Vec<String>,
}

impl JobResponse {
    /// The seed's normalized state.
    pub fn normalized_state(&self) -> String {
        self.state.join("_")
    }

    /// A response started at 1000.
    pub fn new(id: &str, scope: &str, order: &str, state: &[&str]) -> Self {
        JobResponse {
            id: id.into(),
            scope: scope.into(),
            job_order_id: order.into(),
            start_time: 1000,
            state: state.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

/// A work master, listed per scope in a plain set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(kind = "workmaster", key = "workmaster:{id}", list(key = "workmaster:list:{scope}"))]
pub struct WorkMaster {
    /// Id.
    pub id: String,
    /// Scope.
    pub scope: String,
    /// Name.
    pub name: String,
}
