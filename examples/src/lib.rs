//! Runnable microdcs programs. [`plant`] is the reference plant keyspace, used by
//! the `plant` binary (the main demo) and by the tests; [`recipe`] runs a small
//! SFC recipe on it through the poller.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod logging;
pub mod miroir;
pub mod plant;
pub mod prometheus;
pub mod queue;
pub mod recipe;

/// What a program's `run` returns.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The connection of a program run by hand: the configuration from the
/// environment, a Valkey started here unless
/// `APP_MicroDcs__Valkey__ConnectionString` names one, and `prefix` unless
/// `APP_MicroDcs__Valkey__KeyPrefix` sets another (on a cluster it must be
/// one hash tag, such as `{miroir}`). Keep the server (if any) alive while
/// the handle is in use: it stops when dropped.
///
/// # Errors
/// A configuration, server start or connect error.
pub async fn connect_or_start(
    prefix: &str,
) -> Res<(microdcs_valkey::Valkey, Option<microdcs_valkey::testing::ValkeyServer>)> {
    let mut config = microdcs_valkey::MicroDcsConfig::from_env()?;
    let server = if std::env::var_os("APP_MicroDcs__Valkey__ConnectionString").is_some() {
        None
    } else {
        let server = microdcs_valkey::testing::ValkeyServer::start_local(&[])?;
        config.set("Valkey:ConnectionString", &server.host_port())?;
        Some(server)
    };
    if std::env::var_os("APP_MicroDcs__Valkey__KeyPrefix").is_none() {
        config.set("Valkey:KeyPrefix", prefix)?;
    }
    Ok((microdcs_valkey::Valkey::connect(&config.valkey).await?, server))
}

/// Runs a program's `run` with logging from the environment: exit code 0,
/// or 2 after printing the error as `name: error`.
pub async fn main_of(name: &str, run: impl Future<Output = Res<()>>) -> std::process::ExitCode {
    logging::init_from_env();
    match run.await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
