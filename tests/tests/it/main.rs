//! The integration suite: every ordinary test in one binary, a module per
//! subject (the layout of cargo's own test suite). One binary links once
//! and lets a runner (`cargo nextest run`) spread its tests over the cores.
//!
//! Multi-node and wall-clock tests (Sentinel, cluster faults, histories,
//! bounds, the long queue run) are in `tests/tests/scenarios`; the tests
//! that install a process-global recorder or subscriber keep a binary each
//! (`connection`, `counts_and_lifetimes`, `observability`), and trybuild's
//! cases are `ui`.
//!
//! A test that stops, restarts or cuts its server, kills every client of
//! it, or counts the server's commands sits in a module named `standalone`
//! and starts a server of its own: the cluster suite runs everything else
//! against one shared cluster node (`.config/nextest.toml`, profile
//! `cluster`).

mod acl;
mod batch;
mod compact;
mod compact_json;
mod config;
mod consumers;
mod coordination;
mod derive_docs;
mod durability;
mod each;
mod errors;
mod expiry;
mod families;
mod harness;
mod hostile;
mod layers;
mod lua_snapshots;
mod maintenance;
mod mcp;
mod member;
mod model;
mod pages;
mod promises;
mod read_back;
mod schema_lock;
mod secure;
mod send;
mod sfc;
mod shard_slots;
mod step;
mod step_effects;
mod store;
mod streams;
mod tenants;
mod tombstones;
mod ttl;
mod verify_versions;
