//! clap's errors as the one `concur: …` line every other bad input gets: the value, what is
//! allowed, and where to read more, instead of clap's several lines and its tips (one of which,
//! "use '-- -1'", would turn a bad count into a study name).

use std::ffi::OsString;

/// A clap error as a usage error: its one [`line`], and the flag it refuses when clap names
/// one (its `InvalidArg` context, `--rate <RATE>`: the flag is the name before the value).
pub(crate) fn error(e: &clap::Error, args: &[OsString]) -> crate::base::error::Error {
    use clap::error::{ContextKind, ContextValue};
    let text = line(e, args);
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg
            .split([' ', '=', '<'])
            .next()
            .filter(|f| f.starts_with('-'))
            .map(str::to_string),
        _ => None,
    };
    match flag {
        Some(f) => crate::base::error::Error::flag(&f, text),
        None => crate::base::error::Error::usage(text),
    }
}

/// The one line for a clap error (without the `concur: ` that [`crate::os::terminal::fatal`] adds).
pub(crate) fn line(e: &clap::Error, args: &[OsString]) -> String {
    if e.kind() == clap::error::ErrorKind::InvalidUtf8 {
        return not_utf8(args);
    }
    let rendered = e.render().to_string();
    let mut usage = None;
    let mut parts: Vec<String> = Vec::new();
    for l in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(u) = l.strip_prefix("Usage: ") {
            usage = Some(command_of_usage(u));
        } else if l.starts_with("For more information") || l.starts_with("tip: to pass") {
            // clap's pointer to --help is replaced by ours, naming the subcommand; its advice
            // to pass a dash value after `--` would make it a positional argument.
        } else if let Some(tip) = l.strip_prefix("tip: ") {
            parts.push(format!("({tip})"));
        } else {
            let l = l.strip_prefix("error: ").unwrap_or(l);
            match parts.last_mut() {
                // The list under "the following required arguments were not provided:".
                Some(p) if p.ends_with(':') => {
                    p.push(' ');
                    p.push_str(l)
                }
                Some(p) if !p.starts_with('(') && !l.starts_with('[') => {
                    p.push_str(", ");
                    p.push_str(l)
                }
                _ => parts.push(l.to_string()),
            }
        }
    }
    let mut text = parts.join(" ");
    if let Some(cmd) = usage {
        text.push_str(&format!("; see '{cmd} --help'"));
    }
    text
}

/// `concur run [OPTIONS] [STUDY]` → `concur run`.
fn command_of_usage(usage: &str) -> String {
    usage
        .split_whitespace()
        .take_while(|w| !w.starts_with(['[', '<', '-']))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Which argument is not UTF-8, and the flag it belongs to (clap does not say).
fn not_utf8(args: &[OsString]) -> String {
    let Some(k) = args.iter().position(|a| a.to_str().is_none()) else {
        return "an argument is not valid UTF-8".to_string();
    };
    let arg = args[k].to_string_lossy();
    let flag = match arg.split_once('=') {
        Some((f, _)) if f.starts_with('-') => Some(f.to_string()),
        _ => k
            .checked_sub(1)
            .and_then(|p| args[p].to_str())
            .filter(|p| p.starts_with('-'))
            .map(str::to_string),
    };
    match flag {
        Some(f) => format!("{f} '{arg}' is not valid UTF-8; {f} takes text"),
        None => format!("argument '{arg}' is not valid UTF-8: it must be text"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> String {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        match crate::cli::help::command().try_get_matches_from(&args) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => line(&e, &args),
        }
    }

    #[test]
    fn every_clap_error_is_one_line_naming_the_value() {
        for (args, wanted) in [
            (&["concur", "run", "-n", "-1"][..], "'-1'"),
            (&["concur", "run", "-n", "1,2,,3"], "''"),
            (&["concur", "run", "--bogus"], "'--bogus'"),
            (&["concur", "jobs", "enqueue"], "-n <N>"),
            (&["concur", "frob"], "'frob'"),
            (&["concur", "serve", "--addr", "nope"], "'nope'"),
        ] {
            let l = parse(args);
            assert!(!l.contains('\n'), "{args:?}: {l}");
            assert!(l.contains(wanted), "{args:?}: {l}");
            assert!(!l.contains("-- -"), "{args:?}: {l}");
        }
        assert!(parse(&["concur", "run", "--bogus"]).ends_with("see 'concur run --help'"));
    }

    #[test]
    fn a_clap_error_carries_the_flag_it_refuses_as_a_value() {
        use crate::base::error::Input;
        let input = |args: &[&str]| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            match crate::cli::help::command().try_get_matches_from(&args) {
                Ok(_) => panic!("{args:?} parsed"),
                Err(e) => error(&e, &args).input().cloned(),
            }
        };
        assert_eq!(
            input(&["concur", "run", "--interval", "soon"]),
            Some(Input::Flag("--interval".into()))
        );
        assert_eq!(
            input(&["concur", "serve", "--addr", "nope"]),
            Some(Input::Flag("--addr".into()))
        );
        assert_eq!(input(&["concur", "frob"]), Some(Input::Other));
    }

    #[test]
    fn a_value_that_is_not_utf8_names_its_flag() {
        use std::os::unix::ffi::OsStringExt;
        let bad = OsString::from_vec(b"x\xff".to_vec());
        let args = vec!["concur".into(), "run".into(), "--url".into(), bad];
        let l = not_utf8(&args);
        assert!(l.starts_with("--url 'x\u{fffd}' is not valid UTF-8"), "{l}");
    }
}
