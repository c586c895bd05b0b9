//! Document types shared by the integration tests, the benches and the demo:
//! the plant keyspace's job response (sorted-set list, unique by-order index,
//! group by-state index) and work master (plain-set list). One declaration,
//! so a test and the demo can never drift apart.

pub use microdcs_examples::plant::{JobOrder, JobResponse, Plant, SfcState, WorkMaster};

use microdcs_valkey::Document;
use serde::{Deserialize, Serialize};

/// The job response of the benches: the plant job response's key schema
/// (same families, same indexes) with a `data` payload, so a document is
/// about the size the benchmark reports claim (around 300 bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Document)]
#[microdcs(
    kind = "jobresponse",
    key = "jobresponse:{id}",
    list(key = "jobresponse:list:{scope}", score = start_time),
    unique(key = "jobresponse:byorder:{order}", order = job_order_id),
    group(key = "jobresponse:bystate:{scope}:{state}", state = normalized_state())
)]
pub struct PaddedJobResponse {
    /// Id.
    pub id: String,
    /// Scope.
    pub scope: String,
    /// The job order (unique index).
    pub job_order_id: String,
    /// Start time (list score).
    pub start_time: i64,
    /// State texts (group index).
    pub state: Vec<String>,
    /// Payload.
    pub data: String,
}

impl PaddedJobResponse {
    /// The state texts joined with `_`, as the plant job response does.
    pub fn normalized_state(&self) -> String {
        self.state.join("_")
    }
}
