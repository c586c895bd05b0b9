//! Document types shared by the integration tests, the benches and the demo:
//! the plant keyspace's job response (sorted-set list, unique by-order index,
//! group by-state index) and work master (plain-set list). One declaration,
//! so a test and the demo can never drift apart.

pub use microdcs_examples::plant::{JobOrder, JobResponse, Plant, SfcState, WorkMaster};

/// The plant keyspace on a connection.
pub type PlantHandle = microdcs_valkey::KeyspaceHandle<Plant>;
