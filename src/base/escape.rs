//! Text from outside made safe to show: control characters and bidirectional overrides as
//! escapes (a terminal, a table, a Markdown file, JSON), and HTML's special characters.

use std::borrow::Cow;
use std::fmt::{self, Display};

/// Escapes text for HTML: control characters shown as escapes, as on the terminal (line
/// breaks kept), and `& < > " '` as entities.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in escape_controls_but_newlines(s).chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` with every control character shown as an escape: C0 controls and DEL as `\x1b`
/// (`\t`, `\n` and `\r` as those), C1 controls as `\u{9b}`, and the bidirectional overrides
/// and isolates (U+202A to U+202E, U+2066 to U+2069) as `\u{202e}`, which can make a
/// terminal show text in another order than it is ("Trojan Source", CVE-2021-42574). For
/// text from outside (an agent's name, host, answer or error; a results file from elsewhere)
/// before it reaches a terminal, a table or a Markdown file: an escape sequence there can
/// clear the screen, retitle the window or hide a line. A backslash is left as it is: the
/// escapes are for reading, not for parsing back.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// [`escape_controls`], keeping line feeds: for a block of several lines.
pub fn escape_controls_but_newlines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// `text` as [`escape_controls`] shows it, for `format!` (`format!("agent '{}'",
/// Escaped(&info.name))`).
pub struct Escaped<'a>(pub &'a str);

impl Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_controls(self.0))
    }
}

/// JSON text with the control characters that JSON lets through raw (C1 controls, DEL, the
/// bidirectional overrides; serde escapes the C0 ones) written as `\u009b` escapes: the same
/// value for a parser, nothing for a terminal or a browser to act on. Such characters only
/// occur inside strings, where the escape is valid; a raw C0 character is whitespace between
/// tokens (pretty-printed JSON's line breaks), kept.
pub fn escape_json_controls(json: &str) -> Cow<'_, str> {
    let raw = |c: char| needs_escape(c) && c >= '\u{7f}';
    if !json.chars().any(raw) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if raw(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether `c` is shown escaped.
pub(crate) fn needs_escape(c: char) -> bool {
    c.is_control()
        // The left-to-right and right-to-left marks reorder what follows them too.
        || c == '\u{200e}'
        || c == '\u{200f}'
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    let shown = |c: char| !needs_escape(c) || (keep_newlines && c == '\n');
    if text.chars().all(shown) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if shown(c) => out.push(c),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}
