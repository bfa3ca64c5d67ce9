//! Keeping secrets out of what we show: the password of a URL (`redis://:PASSWORD@host`),
//! the value of a credential header (`-H 'Authorization: Bearer TOKEN'`) and of a
//! credential-named query parameter or form field (`?access_token=T`) are replaced by `***`
//! in every message, table, results line and recorded command line. Only what is shown or stored is masked:
//! what is sent (the header, the URL given to the Redis client) is never rewritten.

use std::ops::Range;

/// What a password is shown as.
pub const MASK: &str = "***";

/// Masks the password of every URL-looking word in `arg` (`scheme://user:PASSWORD@host...`
/// becomes `scheme://user:***@host...`) and the value of every credential header
/// (`Authorization: Bearer TOKEN` becomes `Authorization: Bearer ***`, see
/// [`is_credential_header`]); everything else, the user name and the auth scheme included, is
/// kept. `arg` may be a whole command-line argument (`--jobs-backend=redis://u:pw@h/0`,
/// `Authorization: Bearer TOKEN` after `-H`, `-HCookie: s=1`, `--header=X-Api-Key: K`) or a
/// message holding several.
pub fn mask_credentials(arg: &str) -> String {
    let mut spans = password_spans(arg);
    spans.extend(header_value_spans(arg));
    spans.extend(field_value_spans(arg));
    spans.sort_by_key(|s| s.start);
    let mut out = String::with_capacity(arg.len());
    let mut last = 0;
    for span in spans {
        // A header value may hold a URL whose password is a span of its own: one mask.
        if span.end <= last {
            continue;
        }
        let span = span.start.max(last)..span.end;
        out.push_str(&arg[last..span.start]);
        out.push_str(MASK);
        last = span.end;
    }
    out.push_str(&arg[last..]);
    out
}

/// The environment variables that carry a hub's secrets (its key, its URL with a Redis
/// password): concur reads them and removes them from the environment of every program it
/// starts (`cmd:` tasks, hooks, peers, the classic programs).
pub const CHILD_ENV_SECRETS: &[&str] = &["CONCUR_HUB_KEY", "CONCUR_HUB"];

/// The words of a name that say it holds a credential.
const CREDENTIAL_WORDS: &[&str] = &["token", "key", "secret", "password", "passwd", "auth"];

/// Names of one word that hold a credential although no word of [`CREDENTIAL_WORDS`] stands
/// alone in them.
const CREDENTIAL_NAMES: &[&str] = &[
    "authorization",
    "authentication",
    "cookie",
    "apikey",
    "accesstoken",
    "authtoken",
    "sessionid",
    "pwd",
];

/// Whether a name (a header, a query parameter, a form field) says its value is a
/// credential, to be masked wherever it is shown: its words, split on `-`, `_`, `.` and where
/// a lower-case letter meets a capital, include `token`, `key`, `secret`, `password`,
/// `passwd` or `auth` (`X-Api-Key`, `auth_token`, `accessToken`, `X-Password`), or it is one
/// of a few one-word names (`Authorization`, `Cookie`, `Set-Cookie`, `Apikey`); `author`,
/// `keyboard` and `x-monkey` are not.
pub fn is_credential_name(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if (matches!(c, '-' | '_' | '.' | ' ') || (prev_lower && c.is_uppercase()))
            && !word.is_empty()
        {
            words.push(std::mem::take(&mut word));
        }
        if !matches!(c, '-' | '_' | '.' | ' ') {
            word.extend(c.to_lowercase());
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    if !word.is_empty() {
        words.push(word);
    }
    let whole: String = words.concat();
    words
        .iter()
        .any(|w| CREDENTIAL_WORDS.contains(&w.as_str()) || CREDENTIAL_NAMES.contains(&w.as_str()))
        || CREDENTIAL_NAMES.contains(&whole.as_str())
}

/// Whether a request header's value is a credential, masked wherever it is shown
/// ([`is_credential_name`]).
pub fn is_credential_header(name: &str) -> bool {
    is_credential_name(name)
}

/// Where the value of each credential-named query parameter or form field (`name=value`
/// after the start, `?`, `&` or `;`) in `text` is: `?access_token=T&x=1` hides `T`. The value
/// runs to the next `&`, `;`, `#`, blank or quote.
fn field_value_spans(text: &str) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    for (eq, _) in text.match_indices('=') {
        let start = text[..eq]
            .char_indices()
            .rev()
            .find(|&(_, c)| {
                matches!(c, '?' | '&' | ';') || c.is_whitespace() || c == '\'' || c == '"'
            })
            .map_or(0, |(p, c)| p + c.len_utf8());
        let name = &text[start..eq];
        if name.is_empty() || name.contains(['=', '/', ':']) || !is_credential_name(name) {
            continue;
        }
        let rest = &text[eq + 1..];
        let end = rest
            .find(|c: char| matches!(c, '&' | ';' | '#' | '\'' | '"') || c.is_whitespace())
            .unwrap_or(rest.len());
        if end > 0 {
            spans.push(eq + 1..eq + 1 + end);
        }
    }
    spans
}

/// Where the value of each credential header written as `Name: value` in `text` is.
///
/// The name is a word of letters, digits, `-` and `_` (after `-H` when written `-HName:`).
/// The value starts after the colon and its blanks, and runs to the quote that closes it when
/// the header opens with one (`-H 'Authorization: Bearer T' refused`), else to the end of the
/// line: a whole argument, or the rest of a message, which hides more than the value rather
/// than less. `Authorization` and `Proxy-Authorization` keep their scheme (`Bearer`, `Basic`),
/// as a URL keeps its user name: the word before the credentials says how it authenticates,
/// not with what. A value of one word is hidden whole.
fn header_value_spans(text: &str) -> Vec<Range<usize>> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut spans = Vec::new();
    for (colon, _) in text.match_indices(':') {
        // `-H 'Authorization : T'` is sent as Authorization (the plan trims the name), so
        // blanks before the colon do not end the name (found by the header fuzz target).
        let name_end = text[..colon].trim_end().len();
        let start = text[..name_end]
            .char_indices()
            .rev()
            .find(|&(_, c)| !is_name(c))
            .map_or(0, |(p, c)| p + c.len_utf8());
        let word = &text[start..name_end];
        let name = match word.strip_prefix("-H") {
            Some(n) if !is_credential_header(word) => n,
            _ => word,
        };
        // A header name may hold any token character (`X-Ap~-Key` is sent as it is): the
        // name read that wide is a credential's too (found by the header fuzz target).
        let tchar = |c: char| is_name(c) || "!#$%&'*+.^`|~".contains(c);
        let wide = text[..name_end]
            .char_indices()
            .rev()
            .find(|&(_, c)| !tchar(c))
            .map_or(0, |(p, c)| p + c.len_utf8());
        let narrow = is_credential_header(name);
        if !narrow && !is_credential_header(&text[wide..name_end]) {
            continue;
        }
        // A quote before the name opens the header (`'Authorization: T'`), unless it is part
        // of the name read wide (`'-Key:'A` is sent as the name `'-Key`, value `'A`: found by
        // the header fuzz target).
        let open = if narrow { start } else { wide };
        let quote = text[..open]
            .chars()
            .next_back()
            .filter(|&c| c == '\'' || c == '"');
        let rest = &text[colon + 1..];
        // The value starts after every blank the plan trims (a line end too: `-H 'K-Key:\rv'`
        // is sent as `v`), and ends at the next line end.
        let lead = rest.len() - rest.trim_start().len();
        let line_end = lead + rest[lead..].find(['\n', '\r']).unwrap_or(rest.len() - lead);
        // A quote that would close the value before any of it was read is no shell quote but
        // part of the value (`'X-Api-Key: 'v` is sent as the name `'X-Api-Key`, value `'v`):
        // then the value runs to the line end (found by the header fuzz target).
        let end = match quote.and_then(|q| rest[lead..].find(q)) {
            Some(e) if !rest[lead..lead + e].trim().is_empty() => lead + e,
            _ => line_end,
        };
        let value = &rest[..end];
        let mut from = lead;
        if name.eq_ignore_ascii_case("authorization")
            || name.eq_ignore_ascii_case("proxy-authorization")
        {
            let v = &value[lead..];
            if let Some(scheme) = v.find([' ', '\t']).filter(|&i| i > 0) {
                let creds = v[scheme..].trim_start_matches([' ', '\t']);
                if !creds.trim_end().is_empty() {
                    from = lead + v.len() - creds.len();
                }
            }
        }
        let to = value.trim_end().len();
        if from < to {
            spans.push(colon + 1 + from..colon + 1 + to);
        }
    }
    spans
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

    #[test]
    fn masks_credential_header_values_keeping_the_auth_scheme() {
        for (given, shown) in [
            ("Authorization: Bearer s3cr3t", "Authorization: Bearer ***"),
            (
                "authorization:Basic dXNlcjpwYXNz",
                "authorization:Basic ***",
            ),
            ("Authorization: s3cr3t", "Authorization: ***"),
            ("Authorization: Bearer", "Authorization: ***"),
            (
                "Proxy-Authorization: Basic abc==",
                "Proxy-Authorization: Basic ***",
            ),
            ("Cookie: session=s3cr3t; theme=dark", "Cookie: ***"),
            ("COOKIE: a=1", "COOKIE: ***"),
            ("X-Api-Key: s3cr3t", "X-Api-Key: ***"),
            ("x-auth-token:s3cr3t", "x-auth-token:***"),
            ("X-Client-Secret:   s3cr3t  ", "X-Client-Secret:   ***  "),
            ("Api_Key-Token: s3cr3t {rand}", "Api_Key-Token: ***"),
            // The forms of one argument: -HNAME:VALUE, --header=NAME: VALUE.
            (
                "-HAuthorization: Bearer s3cr3t",
                "-HAuthorization: Bearer ***",
            ),
            ("-HX-Api-Key:s3cr3t", "-HX-Api-Key:***"),
            ("--header=Cookie: s=s3cr3t", "--header=Cookie: ***"),
            // A value holding a URL with a password: masked once.
            ("Cookie: u=redis://:pw@h/0", "Cookie: ***"),
        ] {
            assert_eq!(mask_credentials(given), shown, "{given}");
        }
    }

    #[test]
    fn masks_credential_headers_inside_messages_to_their_quote_or_the_line_end() {
        assert_eq!(
            mask_credentials("-H 'Authorization: Bearer s3 cr3t': the value cannot be sent"),
            "-H 'Authorization: Bearer ***': the value cannot be sent"
        );
        assert_eq!(
            mask_credentials(r#"curl -H "X-Api-Key: s3cr3t" http://h/ -H 'Cookie: c=1'"#),
            r#"curl -H "X-Api-Key: ***" http://h/ -H 'Cookie: ***'"#
        );
        assert_eq!(
            mask_credentials("sent Authorization: Bearer s3cr3t to h\nnext line"),
            "sent Authorization: Bearer ***\nnext line"
        );
        assert_eq!(
            mask_credentials("--jobs-backend=redis://:pw@h/0 -H X-Token: t"),
            "--jobs-backend=redis://:***@h/0 -H X-Token: ***"
        );
        // A quote that is part of the name (sent as `'-Key`) does not close the value at once.
        assert_eq!(mask_credentials("'-Key:'A]ge"), "'-Key:***");
        assert_eq!(mask_credentials("'X-Api-Key: 'bacd"), "'X-Api-Key: ***");
        assert_eq!(mask_credentials("'X-Key:\ru"), "'X-Key:\r***");
    }

    #[test]
    fn leaves_other_headers_and_empty_credentials_alone() {
        for same in [
            "Accept: */*",
            "Content-Type: text/plain",
            "Keyboard: k",
            "X-Keys: k",
            "Authorization:",
            "Cookie:   ",
            "http:http://127.0.0.1:8080/add?monkey=a:b",
            "-H",
        ] {
            assert_eq!(mask_credentials(same), same);
        }
        assert!(is_credential_header("X-API-KEY") && is_credential_header("Proxy-Authorization"));
        // A name of the one word `Key` or `Token` is a credential's since review row 12.
        for (shown, masked) in [
            ("Key: k", "Key: ***"),
            ("Token: t", "Token: ***"),
            ("-key: k", "-key: ***"),
            (
                "http:http://127.0.0.1:8080/add?key=a:b",
                "http:http://127.0.0.1:8080/add?key=***",
            ),
        ] {
            assert_eq!(mask_credentials(shown), masked);
        }
        assert!(is_credential_header("Set-Cookie") && is_credential_header("-Key"));
    }

    /// Review row 12: names whose words say credential, in every spelling the review tried.
    #[test]
    fn credential_names_are_known_by_their_words() {
        for name in [
            "Authorization",
            "Proxy-Authorization",
            "Cookie",
            "set-cookie",
            "X-Api-Key",
            "x-auth-token",
            "Client-Secret",
            "Token",
            "Apikey",
            "X-Password",
            "access_token",
            "auth_token",
            "accessToken",
            "password",
            "passwd",
            "api.key",
        ] {
            assert!(is_credential_name(name), "{name}");
        }
        for name in [
            "author",
            "keyboard",
            "x-monkey",
            "accept",
            "x-secrets",
            "q",
            "page",
        ] {
            assert!(!is_credential_name(name), "{name}");
        }
    }

    #[test]
    fn credential_query_parameters_and_form_fields_are_masked() {
        assert_eq!(
            mask_credentials("http:/echo?access_token=abc123&page=2#top"),
            "http:/echo?access_token=***&page=2#top"
        );
        assert_eq!(
            mask_credentials("user=ann&password=hunter2&remember=1"),
            "user=ann&password=***&remember=1"
        );
        assert_eq!(
            mask_credentials("http:/add?a=1,2&author=me"),
            "http:/add?a=1,2&author=me"
        );
    }
}
