//! Human-readable durations on the command line: `500ms`, `5s`, `1.5s`, `2m`, `1h`, or a bare
//! number of seconds (`30`, `0.25`).

use std::time::Duration;

/// Nanoseconds per unit, longest suffix first so `ms` is not read as `m` + `s`.
const UNITS: [(&str, u128); 4] = [
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 3600 * 1_000_000_000),
];

/// Parses a duration: a non-negative decimal number with an optional unit, `ms`, `s`, `m` or
/// `h` (no unit means seconds). Fractions are allowed (`1.5s`, `0.25`), rounded down to the
/// nanosecond. Meant as a clap `value_parser`: the error is a short sentence.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let hint = "expected a duration such as 500ms, 5s, 2m, 1h, or a number of seconds";
    let text = text.trim();
    let (number, unit) = UNITS
        .iter()
        .find_map(|(suffix, nanos)| text.strip_suffix(suffix).map(|n| (n, *nanos)))
        .unwrap_or((text, 1_000_000_000));
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits_only(whole) || !digits_only(fraction) {
        return Err(hint.to_string());
    }
    let too_long = || "duration too long".to_string();
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_long())?
    };
    let mut nanos = whole.checked_mul(unit).ok_or_else(too_long)?;
    // Each fractional digit is worth a tenth of the previous one; past the nanosecond it is 0.
    let mut place = unit;
    for digit in fraction.bytes() {
        place /= 10;
        nanos += u128::from(digit - b'0') * place;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| too_long())?;
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

/// Formats a duration for messages: `250ms`, `5s`, `1.5s`, `2m`, `1h30m`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return if d.subsec_nanos().is_multiple_of(1_000_000) || ms >= 100 {
            format!("{ms}ms")
        } else {
            format!("{:.1}ms", d.as_secs_f64() * 1000.0)
        };
    }
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 || secs < 60 {
        let text = format!("{:.3}", d.as_secs_f64());
        let text = text.trim_end_matches('0').trim_end_matches('.');
        return format!("{text}s");
    }
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, m, 0) => format!("{m}m"),
        (h, 0, 0) => format!("{h}h"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, 0) => format!("{h}h{m}m"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn units() {
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("5s"), Duration::from_secs(5));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("1h"), Duration::from_secs(3600));
    }

    #[test]
    fn a_bare_number_is_seconds() {
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("30"), Duration::from_secs(30));
        assert_eq!(ok(" 7 "), Duration::from_secs(7));
    }

    #[test]
    fn fractions_are_exact() {
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("0.1"), Duration::from_millis(100));
        assert_eq!(ok(".25"), Duration::from_millis(250));
        assert_eq!(ok("2."), Duration::from_secs(2));
        assert_eq!(ok("1.5ms"), Duration::from_micros(1500));
        assert_eq!(ok("0.5m"), Duration::from_secs(30));
        assert_eq!(ok("0.0000000019s"), Duration::from_nanos(1));
    }

    #[test]
    fn garbage_is_refused() {
        for bad in [
            "", "s", "ms", ".", "-1", "-1s", "1.2.3", "1x", "5 s", "1e3", "abc", "1sec", "+5", "1S",
        ] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(err.contains("expected a duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn overflow_is_refused_not_wrapped() {
        let err = parse_duration("99999999999999999999999999999999999999h").unwrap_err();
        assert!(err.contains("too long"), "{err}");
        assert!(parse_duration("18446744073709551616").is_err());
        assert_eq!(ok("18446744073709551615"), Duration::from_secs(u64::MAX));
    }

    #[test]
    fn formatting() {
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(format_duration(Duration::from_secs(5)), "5s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(format_duration(Duration::from_secs(61)), "1m1s");
    }
}
