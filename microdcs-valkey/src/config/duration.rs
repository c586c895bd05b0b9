//! Durations as configuration text: `1s`, `100ms`, `1m30s`, or a .NET
//! `TimeSpan` (`00:00:01.5`), since settings are shared with .NET services.

use std::time::Duration;

use serde::Deserialize;

/// Parses `1s`, `100ms`, `250us`, `2m`, `1h`, `1d`, combinations (`1m30s`),
/// or a .NET `TimeSpan` `[d.]hh:mm:ss[.fff]`.
///
/// # Errors
/// A text that is none of these, with what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration; write e.g. `1s` or `100ms`".into());
    }
    if t.contains(':') {
        return parse_timespan(t).ok_or_else(|| format!("`{t}` is not a duration like `00:00:01.5`"));
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, after) = rest.split_at(num_len);
        let unit_len = after.find(|c: char| c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let value: f64 =
            num.parse().map_err(|_| format!("`{t}` is not a duration; write e.g. `1s`, `100ms`, `1m30s`"))?;
        let scale = match unit.trim() {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "" => return Err(format!("`{t}` has no unit; write e.g. `{num}s` or `{num}ms`")),
            u => return Err(format!("`{t}`: unknown unit `{u}` (use ns, us, ms, s, m, h, d)")),
        };
        total += Duration::from_secs_f64(value * scale);
        rest = next;
    }
    Ok(total)
}

fn parse_timespan(t: &str) -> Option<Duration> {
    let (days, clock) = match t.split_once('.') {
        Some((d, c)) if c.contains(':') && !d.contains(':') => (d.parse::<u64>().ok()?, c),
        _ => (0, t),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    if parts.len() != 3 {
        return None;
    }
    let h: u64 = parts[0].parse().ok()?;
    let m: u64 = parts[1].parse().ok()?;
    let s: f64 = parts[2].parse().ok()?;
    if m >= 60 || !(0.0..60.0).contains(&s) {
        return None;
    }
    Some(Duration::from_secs(days * 86400 + h * 3600 + m * 60) + Duration::from_secs_f64(s))
}

pub(super) fn de_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("00:00:01.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1.02:00:00"), Ok(Duration::from_secs(26 * 3600)));
        assert!(parse_duration("5").unwrap_err().contains("no unit"));
        assert!(parse_duration("5 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("").is_err());
    }
}
