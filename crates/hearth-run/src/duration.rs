//! Durations as people write them: a number of seconds (`30`, `1.5`), or a
//! number with a unit (`500ms`, `30s`, `2m`, `1h`).
//!
//! This is the one reading of a duration in Hearth: `hearth run`'s flags
//! (`--timeout 500ms`), its task lines (`"timeout": "500ms"`), and
//! `hearth serve`'s flags and `hearth.toml` all go through
//! [`parse_duration`], so a duration that works in one place works in all.

use std::time::Duration;

/// Reads a duration: seconds, possibly fractional, or a number followed by
/// `ms`, `s`, `m` or `h`. White space around it, and between the number and
/// its unit, is allowed. The error says what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid =
        || format!("invalid duration {text:?}: expected seconds or a number with ms, s, m or h");
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| invalid())?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(invalid()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("invalid duration {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_units() {
        for (text, expected) in [
            ("0", Duration::ZERO),
            ("30", Duration::from_secs(30)),
            ("1.5", Duration::from_millis(1500)),
            ("500ms", Duration::from_millis(500)),
            ("2s", Duration::from_secs(2)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            (" 1.5 m ", Duration::from_secs(90)),
        ] {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_what_was_expected() {
        for text in ["", "soon", "-1s", "1d", "ms", "1.2.3s", "1e3", "5 minutes"] {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains(&format!("{text:?}")), "{text}: {err}");
        }
        assert!(parse_duration("99999999999999999999999h").is_err());
    }
}
