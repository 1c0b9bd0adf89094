//! The `format` hints an input may carry, and the checks applied to string values that carry
//! one: `uri` (RFC 3986, absolute: a scheme and something after it), `email` (`local@domain`)
//! and `date-time` (RFC 3339). Other hints are kept and not checked.

use std::fmt;

/// A format hint of a string value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// An absolute URI: `scheme:rest`, no whitespace.
    Uri,
    /// An e-mail address: `local@domain.tld`.
    Email,
    /// An RFC 3339 date-time: `2026-01-31T12:00:00Z`, `2026-01-31T12:00:00.5+02:00`.
    DateTime,
    /// Any other hint: kept, not checked.
    Other(String),
}

impl Format {
    /// Reads a hint; unknown hints become [`Format::Other`].
    pub fn parse(text: &str) -> Self {
        match text {
            "uri" => Self::Uri,
            "email" => Self::Email,
            "date-time" => Self::DateTime,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Whether `text` has this format (always true for hints that are not checked).
    pub fn accepts(&self, text: &str) -> bool {
        match self {
            Self::Uri => is_uri(text),
            Self::Email => is_email(text),
            Self::DateTime => is_date_time(text),
            Self::Other(_) => true,
        }
    }

    /// What a value of this format looks like, for error messages.
    pub(crate) fn expected(&self) -> String {
        match self {
            Self::Uri => "an absolute URI (`scheme:...`)".to_owned(),
            Self::Email => "an e-mail address (`name@example.org`)".to_owned(),
            Self::DateTime => "an RFC 3339 date-time (`2026-01-31T12:00:00Z`)".to_owned(),
            Self::Other(name) => format!("a `{name}`"),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Uri => "uri",
            Self::Email => "email",
            Self::DateTime => "date-time",
            Self::Other(name) => name,
        })
    }
}

fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    let scheme_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let rest_ok = !rest.is_empty()
        && !rest
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | '"'));
    let authority_ok = match rest.strip_prefix("//") {
        Some(after) => !after.starts_with('/') && !after.is_empty() || scheme == "file",
        None => true,
    };
    scheme_ok && rest_ok && authority_ok
}

fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c));
    let labels: Vec<&str> = domain.split('.').collect();
    let domain_ok = labels.len() >= 2
        && domain.len() <= 253
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    local_ok && domain_ok
}

/// RFC 3339 `date-time`: `full-date "T" full-time`, with `t`/`z` allowed in lower case and a
/// space accepted for `T` as RFC 3339 notes.
fn is_date_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || !matches!(bytes.get(10), Some(b'T' | b't' | b' ')) {
        return false;
    }
    let (Some(date), Some(time)) = (text.get(..10), text.get(11..)) else {
        return false;
    };
    is_full_date(date) && is_full_time(time)
}

/// Parses exactly `n` ASCII digits.
fn digits(text: &str, n: usize) -> Option<u32> {
    (text.len() == n && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

fn is_full_date(date: &str) -> bool {
    let parts: Vec<&str> = date.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return false;
    };
    let (Some(year), Some(month), Some(day)) = (digits(y, 4), digits(m, 2), digits(d, 2)) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

fn is_full_time(time: &str) -> bool {
    // partial-time, then time-offset: Z | ("+" / "-") hh:mm
    let (partial, offset) = if let Some(p) = time.strip_suffix(['Z', 'z']) {
        (p, None)
    } else {
        let Some(at) = time.rfind(['+', '-']) else {
            return false;
        };
        let (Some(p), Some(o)) = (time.get(..at), time.get(at + 1..)) else {
            return false;
        };
        (p, Some(o))
    };
    if let Some(offset) = offset
        && !is_hh_mm(offset, 23)
    {
        return false;
    }
    let (clock, fraction) = match partial.split_once('.') {
        Some((c, f)) => (c, Some(f)),
        None => (partial, None),
    };
    if fraction.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let parts: Vec<&str> = clock.split(':').collect();
    let [h, m, s] = parts.as_slice() else {
        return false;
    };
    matches!(
        (digits(h, 2), digits(m, 2), digits(s, 2)),
        (Some(0..=23), Some(0..=59), Some(0..=60))
    )
}

fn is_hh_mm(text: &str, max_hour: u32) -> bool {
    let Some((h, m)) = text.split_once(':') else {
        return false;
    };
    matches!((digits(h, 2), digits(m, 2)), (Some(h), Some(0..=59)) if h <= max_hour)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn uris() {
        for ok in [
            "https://example.org/a?b=c#d",
            "mailto:a@b.c",
            "urn:isbn:0451450523",
            "file:///tmp/x",
            "s3://bucket/key",
        ] {
            assert!(Format::Uri.accepts(ok), "{ok}");
        }
        for bad in [
            "",
            "example.org",
            "/relative/path",
            "https:",
            "1http://x",
            "http://exa mple.org",
            "http:///nohost",
            "ht tp://x",
        ] {
            assert!(!Format::Uri.accepts(bad), "{bad}");
        }
    }

    #[test]
    fn emails() {
        for ok in ["a@b.co", "first.last+tag@mail.example.org"] {
            assert!(Format::Email.accepts(ok), "{ok}");
        }
        for bad in [
            "",
            "a",
            "a@b",
            "@b.co",
            "a@@b.co",
            "a b@c.de",
            ".a@b.co",
            "a..b@c.de",
            "a@-b.co",
            "a@b..co",
        ] {
            assert!(!Format::Email.accepts(bad), "{bad}");
        }
    }

    #[test]
    fn date_times() {
        for ok in [
            "2026-01-31T12:00:00Z",
            "2024-02-29T23:59:60.123+02:00",
            "2026-12-01t00:00:00z",
            "2026-12-01 00:00:00-05:30",
        ] {
            assert!(Format::DateTime.accepts(ok), "{ok}");
        }
        for bad in [
            "",
            "2026-01-31",
            "2026-01-31T12:00:00",
            "2026-02-29T12:00:00Z",
            "2026-13-01T12:00:00Z",
            "2026-01-32T12:00:00Z",
            "2026-01-31T24:00:00Z",
            "2026-01-31T12:60:00Z",
            "2026-01-31T12:00:00.Z",
            "2026-01-31T12:00:00+2:00",
            "2026-01-31T12:00:00+24:00",
            "26-01-31T12:00:00Z",
            "２０２６-01-31T12:00:00Z",
        ] {
            assert!(!Format::DateTime.accepts(bad), "{bad}");
        }
    }

    #[test]
    fn unknown_hints_are_kept_and_not_checked() {
        let hint = Format::parse("hostname");
        assert_eq!(hint, Format::Other("hostname".into()));
        assert!(hint.accepts("anything at all"));
        assert_eq!(hint.to_string(), "hostname");
    }

    proptest! {
        #[test]
        fn checks_never_panic(text in "\\PC{0,40}") {
            for f in [Format::Uri, Format::Email, Format::DateTime] {
                let _ = f.accepts(&text);
            }
        }

        #[test]
        fn every_real_date_time_is_accepted(
            y in 0u32..=9999, m in 1u32..=12, d in 1u32..=28,
            h in 0u32..=23, mi in 0u32..=59, s in 0u32..=59,
            frac in proptest::option::of(0u32..1_000_000),
            off in proptest::option::of((any::<bool>(), 0u32..=23, 0u32..=59)),
        ) {
            let mut text = format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
            if let Some(f) = frac {
                text.push_str(&format!(".{f}"));
            }
            match off {
                None => text.push('Z'),
                Some((plus, oh, om)) => {
                    text.push_str(&format!("{}{oh:02}:{om:02}", if plus { '+' } else { '-' }));
                }
            }
            prop_assert!(Format::DateTime.accepts(&text), "{}", text);
        }
    }
}
