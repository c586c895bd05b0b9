//! The demo's `/metrics` page: the standard Prometheus exporter
//! (`metrics-exporter-prometheus`) installed as the process's recorder,
//! serving every series the runtime records through the `metrics` facade
//! (counters, gauges and histograms). The runtime itself only records, so
//! an application installs whichever exporter it already runs.

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};
use microdcs_valkey::observe::OPERATION_DURATION;

/// Upper bounds of the operation-duration buckets, in seconds (the
/// OpenTelemetry advice for database client durations, from 1 ms to 10 s).
pub const BUCKETS: [f64; 9] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0];

/// Installs the exporter as the process's metrics recorder and serves the
/// text format on `addr` (any path but `/health`) from the current Tokio
/// runtime. Names as Prometheus recommends: `.` becomes `_`, counters end
/// in `_total`, the operation duration in `_seconds`.
///
/// # Errors
/// A recorder is installed already, or `addr` cannot be bound.
pub fn install(addr: std::net::SocketAddr) -> Result<(), BuildError> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .with_recommended_naming(true)
        .set_buckets_for_metric(Matcher::Full(OPERATION_DURATION.to_owned()), &BUCKETS)?
        .install()?;
    // The unit gives the histogram its `_seconds` suffix.
    metrics::describe_histogram!(
        OPERATION_DURATION,
        metrics::Unit::Seconds,
        "Duration of one public operation of the runtime"
    );
    Ok(())
}
