//! Errors say what and where: a caller's mistake is `InvalidArgument`
//! (never `Protocol`, which means the server said something unexpected),
//! and an error about a document names its kind and id.

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::{server, unique_prefix};
use microdcs_valkey::{Error, Valkey, config::WriteOptions, poller::Poller, store::MaintenanceOptions};

#[tokio::test]
async fn caller_mistakes_are_invalid_arguments() {
    let s = server();
    let valkey = Valkey::connect_url(s.url(), unique_prefix("errors"), WriteOptions::default()).await.unwrap();
    let responses = Plant::open(valkey.clone()).store::<JobResponse>();
    // An index the type does not have.
    let err =
        responses.verify(&MaintenanceOptions { index: Some("by_colour"), ..Default::default() }).await.unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("by_colour") && m.contains("by_order")), "{err:?}");
    assert!(err.is_invalid_input() && !err.is_connection());
    // An id that cannot be a key.
    let err = responses.get("").await.unwrap_err();
    assert!(err.is_invalid_input(), "{err:?}");
    // A poller on a handle that has no pub/sub client.
    let manager =
        microdcs_valkey::redis::aio::ConnectionManager::new(microdcs_valkey::redis::Client::open(s.url()).unwrap())
            .await
            .unwrap();
    let bare = Valkey::from_manager(manager, unique_prefix("errors-bare"), WriteOptions::default());
    let err = Poller::new(bare, "c").start().await.unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("pub/sub")), "{err:?}");
}
