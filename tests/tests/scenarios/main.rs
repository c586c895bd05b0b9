//! Scenarios: multi-node deployments (Sentinel with replicas, clusters of
//! three primaries, fault histories) and tests bound by wall-clock sleeps
//! (bounds, the 5,000-job queue, chaos), the admin tool's migration on a
//! 3+3 cluster and the rolling deploy of two releases. They start their
//! own servers.
//! Under nextest the multi-node ones run one at a time (test group
//! `multi-node` in `.config/nextest.toml`), so two clusters never compete
//! for the cores their timings assume.

mod admin;
mod bounds;
mod chaos;
mod cluster;
mod cluster_faults;
mod cluster_hung_primary;
mod evolution;
mod history;
mod queue;
mod replication;
mod sentinel;
mod sentinel_two_replicas;
mod sharded;
