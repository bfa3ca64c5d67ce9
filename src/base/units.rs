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
    let bad = || format!("'{text}' is not a duration (expected e.g. 100ms or 2s)");
    let unit_ns: u128 = match unit {
        "" | "ms" => 1_000_000,
        "us" | "µs" => 1_000,
        "ns" => 1,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        _ => {
            return Err(format!(
                "'{text}' has an unknown unit '{unit}' (allowed: ns, us, ms, s, m)"
            ))
        }
    };
    // Decimal arithmetic in whole nanoseconds, exact: a float product is not
    // (`5442125151` ms came out as 5442125.150999999 s), and fmt_duration_spec then printed
    // the duration back as another value. Fraction digits past the 20th are below 1 ns.
    let (whole, fraction) = num.split_once('.').unwrap_or((num, ""));
    if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
        return Err(bad());
    }
    let out_of_range = || format!("'{text}' is out of range");
    let whole: u128 = match whole {
        "" => 0,
        w => w.parse().map_err(|_| out_of_range())?,
    };
    let digits = &fraction[..fraction.len().min(20)];
    let fraction_ns = match digits {
        "" => 0,
        d => d.parse::<u128>().map_err(|_| bad())? * unit_ns / 10u128.pow(d.len() as u32),
    };
    let nanos = whole
        .checked_mul(unit_ns)
        .and_then(|n| n.checked_add(fraction_ns))
        .filter(|&n| n <= 1_000_000_000 * 1_000_000_000)
        .ok_or_else(out_of_range)?;
    Ok(Duration::from_nanos(nanos as u64))
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

/// Formats a duration in the spec grammar (`100ms`, `2s`, `1500ns`), the inverse of
/// [`parse_duration`]: exact, so a refusal names the value typed (`--switch-interval 500ns`
/// is not shown as `0s`).
pub fn fmt_duration_spec(d: Duration) -> String {
    let ns = d.as_nanos();
    if !ns.is_multiple_of(1000) {
        return format!("{ns}ns");
    }
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

/// Formats a byte count that may be negative or fractional (memory per task, a difference of
/// two measurements): `-120 B`, `812 B`, `2.4 KiB`, `1.50 MiB`.
pub fn fmt_bytes_signed(b: f64) -> String {
    if !b.is_finite() {
        return "-".into();
    }
    let a = b.abs();
    if a < 1024.0 {
        format!("{b:.0} B")
    } else if a < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{:.2} MiB", b / 1024.0 / 1024.0)
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

/// `12345` as `12,345`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
        for s in ["100ms", "2s", "250us", "500ns", "1500ns"] {
            assert_eq!(fmt_duration_spec(parse_duration(s).unwrap()), s);
        }
    }

    #[test]
    fn durations_are_read_exactly() {
        // Found by the `units` fuzz target: read through a float product, this came out as
        // 5442125.150999999 s and printed back as 5442125150999us.
        let d = parse_duration("5442125151").unwrap();
        assert_eq!(d, Duration::from_millis(5_442_125_151));
        assert_eq!(fmt_duration_spec(d), "5442125151ms");
        assert_eq!(
            parse_duration("999999999.000001s").unwrap().subsec_micros(),
            1
        );
        assert_eq!(parse_duration(".5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("0.0000000001s").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_duration("1000000000s").unwrap(),
            Duration::from_secs(1_000_000_000)
        );
        for bad in [
            ".",
            "1..2",
            "1.2.3s",
            "1000000000.1s",
            "99999999999999999999999999999999999999999s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
