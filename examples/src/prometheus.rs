//! A small Prometheus exporter for the demo: a `metrics` recorder keeping
//! counters and histograms (fixed buckets in seconds), and `/metrics` in
//! the text format over plain HTTP. Written here instead of pulling an
//! exporter crate with an HTTP stack into the workspace: the demo needs
//! one page, and the runtime records through the facade, so an
//! application installs whichever exporter it already runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Upper bounds of the histogram buckets, in seconds (the OpenTelemetry
/// advice for database client durations, from 1 ms to 10 s).
pub const BUCKETS: [f64; 9] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0];

/// One series: its name and labels, as registered.
type SeriesKey = (String, Vec<(String, String)>);

#[derive(Default)]
struct Series {
    counters: BTreeMap<SeriesKey, Arc<CounterCell>>,
    histograms: BTreeMap<SeriesKey, Arc<HistogramCell>>,
}

#[derive(Default)]
struct CounterCell(AtomicU64);

impl metrics::CounterFn for CounterCell {
    fn increment(&self, v: u64) {
        self.0.fetch_add(v, Ordering::Relaxed);
    }
    fn absolute(&self, v: u64) {
        self.0.fetch_max(v, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct HistogramCell {
    /// Counts per bucket (not cumulative), then the overflow.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    /// The sum in nanoseconds-of-a-unit (value x 1e9), kept as an integer.
    sum_nanos: AtomicU64,
}

impl metrics::HistogramFn for HistogramCell {
    fn record(&self, v: f64) {
        let i = BUCKETS.iter().position(|b| v <= *b).unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add((v.max(0.0) * 1e9) as u64, Ordering::Relaxed);
    }
}

/// The demo has no gauges; one is accepted and dropped.
struct NoGauge;

impl metrics::GaugeFn for NoGauge {
    fn increment(&self, _: f64) {}
    fn decrement(&self, _: f64) {}
    fn set(&self, _: f64) {}
}

/// The recorder; clones share its series.
#[derive(Clone, Default)]
pub struct Exporter {
    series: Arc<Mutex<Series>>,
}

fn series_key(key: &Key) -> SeriesKey {
    let mut labels: Vec<(String, String)> = key.labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
    labels.sort();
    (key.name().to_owned(), labels)
}

impl Recorder for Exporter {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut s = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        Counter::from_arc(s.counters.entry(series_key(key)).or_default().clone())
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(Arc::new(NoGauge))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut s = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        Histogram::from_arc(s.histograms.entry(series_key(key)).or_default().clone())
    }
}

/// A Prometheus name: `.` and other characters outside `[a-zA-Z0-9_:]`
/// become `_`.
fn prom_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' }).collect()
}

fn prom_labels(labels: &[(String, String)], extra: Option<(&str, String)>) -> String {
    let escape = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    let mut parts: Vec<String> = labels.iter().map(|(k, v)| format!("{}=\"{}\"", prom_name(k), escape(v))).collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() { String::new() } else { format!("{{{}}}", parts.join(",")) }
}

impl Exporter {
    /// Every series in the Prometheus text format (version 0.0.4):
    /// counters as `<name>_total`, histograms (in seconds) as
    /// `<name>_seconds_bucket`/`_sum`/`_count`.
    pub fn render(&self) -> String {
        let s = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        let mut typed = std::collections::BTreeSet::new();
        for ((name, labels), cell) in &s.counters {
            let name = format!("{}_total", prom_name(name));
            if typed.insert(name.clone()) {
                let _ = writeln!(out, "# TYPE {name} counter");
            }
            let _ = writeln!(out, "{name}{} {}", prom_labels(labels, None), cell.0.load(Ordering::Relaxed));
        }
        for ((name, labels), cell) in &s.histograms {
            let base = format!("{}_seconds", prom_name(name.trim_end_matches(".seconds")));
            if typed.insert(base.clone()) {
                let _ = writeln!(out, "# TYPE {base} histogram");
            }
            let mut cumulative = 0;
            for (i, bound) in BUCKETS.iter().map(|b| b.to_string()).chain(["+Inf".to_owned()]).enumerate() {
                cumulative += cell.buckets[i].load(Ordering::Relaxed);
                let _ = writeln!(out, "{base}_bucket{} {cumulative}", prom_labels(labels, Some(("le", bound))));
            }
            let sum = cell.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(out, "{base}_sum{} {sum}", prom_labels(labels, None));
            let _ = writeln!(out, "{base}_count{} {cumulative}", prom_labels(labels, None));
        }
        out
    }

    /// Serves `GET /metrics` on `listener` until the task is dropped; any
    /// other path is 404. One request per connection.
    pub async fn serve(self, listener: tokio::net::TcpListener) {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { continue };
            let me = self.clone();
            tokio::spawn(async move {
                let deadline = std::time::Duration::from_secs(5);
                let Ok(Some(buf)) = tokio::time::timeout(deadline, read_head(&mut socket)).await else { return };
                let request = String::from_utf8_lossy(&buf);
                let (status, body) = if request.starts_with("GET /metrics ") || request.starts_with("GET /metrics?") {
                    ("200 OK", me.render())
                } else {
                    ("404 Not Found", "not found: GET /metrics\n".to_owned())
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: \
                     close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    }
}

/// The largest request head the exporter reads; a scrape sends a few lines.
const MAX_HEAD: usize = 8192;

/// Reads one request head, up to the blank line that ends it. A client may
/// send its request in several writes, and answering after the first read
/// would close the socket with the rest unread, which resets the
/// connection under the client's feet. `None` for a closed connection or a
/// head over [`MAX_HEAD`].
async fn read_head(socket: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() + n > MAX_HEAD {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf)
}

/// Installs a new exporter as the process's metrics recorder and serves it
/// on `addr`: the address bound and the serving task.
///
/// # Errors
/// A recorder is installed already, or `addr` cannot be bound.
pub async fn install(
    addr: std::net::SocketAddr,
) -> std::io::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    let exporter = Exporter::default();
    metrics::set_global_recorder(exporter.clone()).map_err(|e| std::io::Error::other(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((bound, tokio::spawn(exporter.serve(listener))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_names_buckets_and_escapes_labels() {
        let e = Exporter::default();
        metrics::with_local_recorder(&e, || {
            metrics::counter!("microdcs.valkey.operations", "db.operation.name" => "put").increment(2);
            let h = metrics::histogram!("db.client.operation.duration", "x" => "a\"b");
            h.record(0.0004);
            h.record(0.02);
            h.record(30.0);
        });
        let text = e.render();
        assert!(text.contains("# TYPE microdcs_valkey_operations_total counter"), "{text}");
        assert!(text.contains("microdcs_valkey_operations_total{db_operation_name=\"put\"} 2"), "{text}");
        assert!(text.contains("# TYPE db_client_operation_duration_seconds histogram"), "{text}");
        assert!(text.contains("db_client_operation_duration_seconds_bucket{x=\"a\\\"b\",le=\"0.001\"} 1"), "{text}");
        assert!(text.contains("db_client_operation_duration_seconds_bucket{x=\"a\\\"b\",le=\"0.05\"} 2"), "{text}");
        assert!(text.contains("db_client_operation_duration_seconds_bucket{x=\"a\\\"b\",le=\"+Inf\"} 3"), "{text}");
        assert!(text.contains("db_client_operation_duration_seconds_count{x=\"a\\\"b\"} 3"), "{text}");
    }

    #[tokio::test]
    async fn a_request_written_in_pieces_gets_its_answer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(Exporter::default().serve(listener));
        let mut con = tokio::net::TcpStream::connect(addr).await.unwrap();
        con.set_nodelay(true).unwrap();
        for piece in ["GET ", "/metrics", " HTTP/1.1\r\n", "Host: x\r\n", "\r\n"] {
            con.write_all(piece.as_bytes()).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let mut reply = String::new();
        con.read_to_string(&mut reply).await.unwrap();
        server.abort();
        assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
    }
}
