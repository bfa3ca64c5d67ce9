//! Keeping secrets out of what we show: the password of a URL (`redis://:PASSWORD@host`) is
//! replaced by `***` in every message, table and recorded command line.

use std::ops::Range;

/// What a password is shown as.
pub const MASK: &str = "***";

/// Masks the password of every URL-looking word in `arg` (`scheme://user:PASSWORD@host...`
/// becomes `scheme://user:***@host...`); everything else, the user name included, is kept.
/// `arg` may be a whole command-line argument (`--jobs-backend=redis://u:pw@h/0`) or a
/// message holding several URLs.
pub fn mask_credentials(arg: &str) -> String {
    let mut out = String::with_capacity(arg.len());
    let mut last = 0;
    for span in password_spans(arg) {
        out.push_str(&arg[last..span.start]);
        out.push_str(MASK);
        last = span.end;
    }
    out.push_str(&arg[last..]);
    out
}

/// The passwords of the URLs in `text`, as written (percent-encoded if they were).
pub fn passwords(text: &str) -> Vec<&str> {
    password_spans(text).into_iter().map(|s| &text[s]).collect()
}

/// Where the password of each URL in `text` is, as byte ranges, in order.
fn password_spans(text: &str) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("://") {
        let sep = from + i;
        let start = sep + 3;
        from = start;
        let scheme_start = text[..sep]
            .char_indices()
            .rev()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
            .map_or(0, |(p, c)| p + c.len_utf8());
        if !text[scheme_start..sep].starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        // The authority ends with the word, or where another URL begins.
        let rest = &text[start..];
        let mut end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        if let Some(next) = rest[..end].find("://") {
            end = next;
        }
        let word = &rest[..end];
        if let Some(range) = userinfo_password(word) {
            spans.push(start + range.start..start + range.end);
        }
    }
    spans
}

/// The password's range in the part of a URL after `://`.
///
/// RFC 3986 ends the user information at the last `@` before the first `/`, `?` or `#`. A
/// password holding one of those unencoded (which a strict parser takes for the path) would
/// then be shown, so when no `@` comes before them we still take the word's last `@`, unless
/// what precedes it reads as `host:PORT/...` (a path or query that holds an `@`, such as
/// `http://h:8080/add?mail=a@b`).
fn userinfo_password(word: &str) -> Option<Range<usize>> {
    let strict_end = word.find(['/', '?', '#']).unwrap_or(word.len());
    let at = match word[..strict_end].rfind('@') {
        Some(at) => at,
        None => {
            let at = word.rfind('@')?;
            let (user, pass) = word[..at].split_once(':')?;
            let pass_head = &pass[..pass.find(['/', '?', '#']).unwrap_or(pass.len())];
            let looks_like_port = !user.is_empty()
                && !user.contains(['/', '?', '#'])
                && !pass_head.is_empty()
                && pass_head.bytes().all(|b| b.is_ascii_digit());
            if looks_like_port || user.contains(['/', '?', '#']) {
                return None;
            }
            at
        }
    };
    let colon = word[..at].find(':')?;
    (colon + 1 < at).then_some(colon + 1..at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_the_password_and_keeps_the_user() {
        for (given, shown) in [
            ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
            ("redis://alice:s3cret@host/0", "redis://alice:***@host/0"),
            ("rediss://u:p%40ss@h", "rediss://u:***@h"),
            // An unencoded '@' or '/' in a password is still hidden.
            ("redis://:p@ss@h:1/0", "redis://:***@h:1/0"),
            ("redis://:pa/ss@h", "redis://:***@h"),
            ("redis://u:pa?ss#x@h/0", "redis://u:***@h/0"),
        ] {
            assert_eq!(mask_credentials(given), shown, "{given}");
        }
    }

    #[test]
    fn masks_urls_inside_arguments_and_messages() {
        assert_eq!(
            mask_credentials("--jobs-backend=redis://u:pw@h/0"),
            "--jobs-backend=redis://u:***@h/0"
        );
        assert_eq!(
            mask_credentials("a=redis://:one@h1,b=redis://:two@h2/1 and http://x:y@z"),
            "a=redis://:***@h1,b=redis://:***@h2/1 and http://x:***@z"
        );
        assert_eq!(
            mask_credentials("cannot reach redis at 'redis://:pw@127.0.0.1:1/0': refused"),
            "cannot reach redis at 'redis://:***@127.0.0.1:1/0': refused"
        );
        assert_eq!(passwords("x redis://u:pw@h y redis://:q@h"), ["pw", "q"]);
    }

    #[test]
    fn leaves_what_has_no_password_alone() {
        for same in [
            "redis://host:6379/0",
            "redis://alice@host/0",
            "redis://alice:@host/0",
            "redis://:@host/0",
            "sqlite:/tmp/a:b@c",
            "sqlite",
            "fib:30",
            "not a url",
            "",
            "://:pw@h",
            "http:http://127.0.0.1:8080/add?name=a@b&delay=100",
            "http://h/p@q",
            "http://h:8080/mail?to=a:b@c",
            "ünïcödé://ä:ö",
        ] {
            assert_eq!(mask_credentials(same), same);
        }
        assert!(passwords("redis://h/0").is_empty());
    }
}
