//! Parsing and printing of durations and byte sizes, the one place for both.

use std::time::Duration;

/// Parses a duration such as `100ms`, `2s`, `1.5s`, `250us`, `1m`; a plain number is
/// milliseconds. Negative, non-finite or unit-less garbage is refused with a reason.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "'{text}' is not a duration (expected a non-negative number with a unit: 500us, 100ms, 2s, 1m)"
        ));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (expected e.g. 100ms or 2s)"))?;
    let scale = match unit {
        "" | "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "s" => 1.0,
        "m" | "min" => 60.0,
        _ => {
            return Err(format!(
                "'{text}' has an unknown unit '{unit}' (allowed: ns, us, ms, s, m)"
            ))
        }
    };
    let secs = value * scale;
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("'{text}' is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a byte size such as `1024`, `64k`, `64KiB`, `2M`, `1MiB` (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: u64 = num.parse().map_err(|_| {
        format!(
            "'{text}' is not a size (expected a whole number of bytes, optionally with k, M or G)"
        )
    })?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "'{text}' has an unknown unit '{unit}' (allowed: k, M, G)"
            ))
        }
    };
    value
        .checked_mul(scale)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// Formats seconds for people: `812 µs`, `12.3 ms`, `1.234 s`.
pub fn fmt_secs(secs: f64) -> String {
    if !secs.is_finite() {
        return "-".into();
    }
    let a = secs.abs();
    if a < 1e-3 {
        format!("{:.0} µs", secs * 1e6)
    } else if a < 1.0 {
        format!("{:.1} ms", secs * 1e3)
    } else {
        format!("{secs:.3} s")
    }
}

/// Formats a duration in the spec grammar (`100ms`, `2s`), the inverse of [`parse_duration`].
pub fn fmt_duration_spec(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// Formats KiB for people: `812 KiB`, `12.3 MiB`, `1.23 GiB`.
pub fn fmt_kib(kib: u64) -> String {
    let k = kib as f64;
    if k < 1024.0 {
        format!("{kib} KiB")
    } else if k < 1024.0 * 1024.0 {
        format!("{:.1} MiB", k / 1024.0)
    } else {
        format!("{:.2} GiB", k / 1024.0 / 1024.0)
    }
}

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339(epoch_s: u64) -> String {
    let (y, m, d) = civil((epoch_s / 86_400) as i64);
    let s = epoch_s % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Now, as RFC 3339 UTC.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5us").unwrap(), Duration::from_micros(5));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("10parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert_eq!(parse_size("64k").unwrap(), 65536);
        assert_eq!(parse_size("2MiB").unwrap(), 2 << 20);
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn duration_spec_round_trips() {
        for s in ["100ms", "2s", "250us"] {
            assert_eq!(fmt_duration_spec(parse_duration(s).unwrap()), s);
        }
    }
}
