//! The example programs' tests, one binary: the command-line tools, the
//! sharded plant on a cluster, the miroir layout's memory budget, the
//! reference keys and the ACL roles with the committed key table.

mod cli;
mod cluster;
mod miroir;
mod reference_keys;
mod roles;
mod schema_lock;
