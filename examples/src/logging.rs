//! `RUST_LOG` for the programs: with the variable set (`RUST_LOG=info`,
//! `RUST_LOG=microdcs_valkey=debug`, any `tracing-subscriber` directive),
//! the runtime's events and one line per finished operation span (its
//! database-client attributes, outcome and time) go to standard error, so
//! standard output and the MCP session on stdio stay as they are. Unset,
//! nothing is installed and nothing is printed.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// Installs the subscriber when `RUST_LOG` is set; a directive that does
/// not parse is reported on standard error and ignored.
pub fn init_from_env() {
    let Some(directives) = std::env::var_os("RUST_LOG") else { return };
    let filter = match EnvFilter::try_new(directives.to_string_lossy()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("RUST_LOG ignored: {e}");
            return;
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
