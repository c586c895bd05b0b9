//! Durations as text: `1s`, `100ms`, `1m30s`, or a .NET `TimeSpan`
//! (`00:00:01.5`), since settings are shared with .NET services. One
//! grammar for the runtime's settings and the derive's `ttl = "..."`.

use std::time::Duration;

/// The longest duration a setting or attribute may hold: 100 years (36500
/// days). Nothing needs to wait longer, and the bound keeps every later sum
/// (`now + timeout`, milliseconds for the server) far from overflowing.
pub const MAX_DURATION: Duration = Duration::from_secs(36_500 * 86_400);

/// Parses `1s`, `100ms`, `250us`, `2m`, `1h`, `1d`, combinations (`1m30s`),
/// or a .NET `TimeSpan` `[d.]hh:mm:ss[.fff]`, of at most [`MAX_DURATION`].
///
/// # Errors
/// A text that is none of these, with what was expected, or a duration
/// longer than [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration; write e.g. `1s` or `100ms`".into());
    }
    if t.contains(':') {
        return parse_timespan(t);
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
        // A huge number of units (or a text of 400 nines, which parses as
        // infinity) is refused here rather than panicking in the conversion.
        let part = Duration::try_from_secs_f64(value * scale).map_err(|_| too_long(t))?;
        total = total.checked_add(part).filter(|d| *d <= MAX_DURATION).ok_or_else(|| too_long(t))?;
        rest = next;
    }
    Ok(total)
}

fn too_long(t: &str) -> String {
    format!("`{t}` is too long; the longest accepted duration is 100 years (36500 days)")
}

fn parse_timespan(t: &str) -> Result<Duration, String> {
    let bad = || format!("`{t}` is not a duration like `00:00:01.5`");
    let (days, clock) = match t.split_once('.') {
        Some((d, c)) if c.contains(':') && !d.contains(':') => {
            // All digits but too many for a u64 is too long, not malformed.
            let days = match d.parse::<u64>() {
                Ok(days) => days,
                Err(_) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => return Err(too_long(t)),
                Err(_) => return Err(bad()),
            };
            (days, c)
        }
        _ => (0, t),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    if parts.len() != 3 {
        return Err(bad());
    }
    let number = |p: &str| -> Result<u64, String> {
        match p.parse::<u64>() {
            Ok(n) => Ok(n),
            Err(_) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => Err(too_long(t)),
            Err(_) => Err(bad()),
        }
    };
    let h = number(parts[0])?;
    let m = number(parts[1])?;
    // Seconds as `ss` or `ss.fff`: digits only, so `1e1`, `inf` or `+5`
    // (which a float parser takes) are not read as durations.
    let plain = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let sec_ok = match parts[2].split_once('.') {
        Some((w, f)) => plain(w) && plain(f),
        None => plain(parts[2]),
    };
    if !sec_ok {
        return Err(bad());
    }
    let s: f64 = parts[2].parse().map_err(|_| bad())?;
    if m >= 60 || !(0.0..60.0).contains(&s) {
        return Err(bad());
    }
    // Checked: a large day or hour count would overflow the seconds.
    let whole = days
        .checked_mul(86_400)
        .and_then(|d| h.checked_mul(3600).and_then(|h| d.checked_add(h)))
        .and_then(|dh| dh.checked_add(m * 60))
        .ok_or_else(|| too_long(t))?;
    Duration::from_secs(whole)
        .checked_add(Duration::from_secs_f64(s))
        .filter(|d| *d <= MAX_DURATION)
        .ok_or_else(|| too_long(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timespan_seconds_are_plain_digits() {
        for t in ["00:00:1e1", "00:00:inf", "00:00:+5", "00:00:5.", "00:00:.5", "00:00:NaN"] {
            assert!(parse_duration(t).is_err(), "{t}");
        }
        assert_eq!(parse_duration("00:00:01.5").unwrap(), Duration::from_millis(1500));
    }

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

    #[test]
    fn durations_too_long_are_errors_not_panics() {
        let nines = format!("{}s", "9".repeat(400));
        for t in [
            "99999999999999999999d",
            nines.as_str(),
            "10000000000000000000s10000000000000000000s",
            "213503982334601.23:59:59",
            "99999999999999999999999.00:00:00",
            "0.99999999999999999999999:00:00",
            "36501d",
            "36500d1ns",
            "36500.00:00:01",
        ] {
            let e = parse_duration(t).unwrap_err();
            assert!(e.contains("too long") && e.contains("100 years"), "{t}: {e}");
        }
        assert_eq!(parse_duration("36500d"), Ok(MAX_DURATION));
        assert_eq!(parse_duration("36500.00:00:00"), Ok(MAX_DURATION));
        assert!(parse_duration("1.2.3s").unwrap_err().contains("not a duration"));
        assert!(parse_duration("x.00:00:01").unwrap_err().contains("not a duration"));
    }
}
