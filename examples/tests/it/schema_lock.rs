//! The committed schema locks of the example keyspaces (`examples/locks/`)
//! are the code's: a change that would break stored data fails here with
//! its fix. After an intended safe change run
//! `BLESS=1 cargo test -p microdcs-examples --test it schema_lock`.

use microdcs_examples::miroir::Miroir;
use microdcs_examples::plant::{Plant, sharded::ShardedPlant};
use microdcs_examples::queue::Queues;

#[test]
fn plant() {
    microdcs_valkey::lock::assert_current::<Plant>("locks/plant.lock");
}

#[test]
fn sharded_plant() {
    microdcs_valkey::lock::assert_current::<ShardedPlant>("locks/sharded_plant.lock");
}

#[test]
fn miroir() {
    microdcs_valkey::lock::assert_current::<Miroir>("locks/miroir.lock");
}

#[test]
fn queues() {
    microdcs_valkey::lock::assert_current::<Queues>("locks/queues.lock");
}
