//! Property tests of the spec parsers: no input makes them panic, a refused spec is a
//! one-line usage error naming it, and every canonical spec prints back exactly as given (a
//! comparison with the input, so a parser that read `fib:20` as `fib:2` fails).

use concur::workload::WorkloadOptions;
use concur::Error;
use proptest::prelude::*;

/// Checks a refusal: a usage error (exit 2) on one line naming the spec.
fn refused_properly(spec: &str, e: &Error) -> Result<(), TestCaseError> {
    let text = e.to_string();
    prop_assert_eq!(e.exit_code(), 2, "{}: {}", spec, text);
    prop_assert!(!text.contains('\n'), "{}: {}", spec, text);
    prop_assert!(text.contains(spec), "{}: {}", spec, text);
    Ok(())
}

/// Canonical workload specs built from their values.
fn canonical_workload() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..=50).prop_map(|n| format!("fib:{n}")),
        (0u64..=1 << 40).prop_map(|n| format!("spin:{n}")),
        (1u64..1000).prop_map(|n| format!("sleep:{n}us")),
        (1u64..1000).prop_map(|n| format!("sleep:{n}ms")),
        (0u64..=3600).prop_map(|n| format!("sleep:{n}s")),
        (0u32..=50)
            .prop_filter("30 is printed as plain `mail`", |n| *n != 30)
            .prop_map(|n| format!("mail:{n}")),
        (1u64..=1 << 20, 1u64..=1000).prop_map(|(b, c)| format!("read:/dev/zero:{b}x{c}")),
        prop::sample::select(vec!["crash:panic", "crash:abort", "crash:segv", "mail"])
            .prop_map(String::from),
        // cmd: keeps the command as typed (quotes and braces included).
        "[a-z0-9 '{}=.-]{0,16}"
            .prop_map(|a| format!("cmd:true {a}"))
            .prop_filter("balanced quotes", |s| s.matches('\'').count() % 2 == 0),
        http_path().prop_map(|p| format!("http:{p}")),
        (1u16.., http_path()).prop_map(|(port, p)| format!("http:http://127.0.0.1:{port}{p}")),
    ]
}

/// Request targets that can be sent as they are, `{rand}` among their pieces.
fn http_path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[a-zA-Z0-9._~-]{1,8}",
            Just("{rand}".to_string()),
            Just("%20".to_string()),
            Just("/".to_string()),
            Just("?".to_string()),
            Just("&".to_string()),
            Just("=".to_string()),
        ],
        0..8,
    )
    .prop_map(|pieces| format!("/{}", pieces.concat()))
}

/// URL-shaped text for `http:` specs, valid and not: schemes, hosts, ports and paths mixed.
fn http_url() -> impl Strategy<Value = String> {
    let scheme = prop::sample::select(vec![
        "http://", "https://", "HTTP://", "ftp://", "http:", "http:/", "http:///", "/", "",
    ]);
    let host = prop::sample::select(vec![
        "127.0.0.1",
        "localhost",
        "[::1]",
        "[::1",
        "::1",
        "u:p@h",
        "{rand}",
        "ex ample",
        "h\\x",
        "xn--nxasmq6b",
        "",
    ]);
    let port = prop::option::of(prop_oneof!["[0-9]{1,6}", "[a-z]{1,3}", Just(String::new())]);
    let rest = prop_oneof![http_path(), "\\PC{0,16}", "[ -~]{0,16}"];
    (scheme, host, port, rest).prop_map(|(s, h, p, r)| match p {
        Some(p) => format!("{s}{h}:{p}{r}"),
        None => format!("{s}{h}{r}"),
    })
}

/// The request target a URL asks for: its path and query, without the fragment.
fn given_target(url: &str) -> String {
    let rest = if url.starts_with('/') {
        url
    } else {
        let scheme = if url.to_ascii_lowercase().starts_with("https://") {
            "https://".len()
        } else {
            "http://".len()
        };
        let rest = &url[scheme..];
        &rest[rest.find(['/', '?', '#']).unwrap_or(rest.len())..]
    };
    let rest = rest.split('#').next().unwrap_or("");
    match rest.chars().next() {
        None => "/".into(),
        Some('?') => format!("/{rest}"),
        Some(_) => rest.into(),
    }
}

/// Whether `sent` is `pattern` with every `{rand}` replaced by 10 lowercase letters.
fn matches_with_rand(pattern: &str, sent: &str) -> bool {
    let mut left = sent;
    for (i, piece) in pattern.split("{rand}").enumerate() {
        if i > 0 {
            let letters = left.get(..10).unwrap_or("");
            if letters.len() != 10 || !letters.bytes().all(|b| b.is_ascii_lowercase()) {
                return false;
            }
            left = &left[10..];
        }
        match left.strip_prefix(piece) {
            Some(l) => left = l,
            None => return false,
        }
    }
    left.is_empty()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn workload_parser_never_panics(s in "\\PC{0,40}") {
        if let Err(e) = concur::workload::parse(&s, &WorkloadOptions::default()) {
            prop_assert_eq!(e.exit_code(), 2);
        }
    }

    #[test]
    fn model_parser_never_panics(s in "\\PC{0,40}") {
        if let Err(e) = concur::model::parse(&s) {
            prop_assert_eq!(e.exit_code(), 2);
        }
    }

    #[test]
    fn http_specs_are_accepted_whole_or_refused_as_usage_errors(url in http_url()) {
        let spec = format!("http:{url}");
        let based = WorkloadOptions {
            base_url: Some("http://127.0.0.1:9".into()),
            ..Default::default()
        };
        for opts in [WorkloadOptions::default(), based.clone()] {
            match concur::workload::parse(&spec, &opts) {
                Ok(w) => {
                    prop_assert_eq!(w.spec(), spec.clone());
                    prop_assert!(w.http().is_some());
                }
                Err(e) => refused_properly(&spec, &e)?,
            }
        }
        // With the run's server known, an accepted URL's request target is sent as given,
        // every {rand} replaced by 10 letters and nothing else changed.
        if let Ok(w) = concur::workload::parse(&spec, &based) {
            let fetched = w.http().and_then(|h| h.url(0)).unwrap_or_default();
            let after_scheme = fetched
                .strip_prefix("http://")
                .or_else(|| fetched.strip_prefix("https://"))
                .unwrap_or("");
            let sent = &after_scheme[after_scheme.find('/').unwrap_or(after_scheme.len())..];
            let given = given_target(&url);
            prop_assert!(matches_with_rand(&given, sent), "{}: sent {}", spec, sent);
        }
    }

    #[test]
    fn canonical_workload_specs_print_back_as_given(spec in canonical_workload()) {
        let w = concur::workload::parse(&spec, &WorkloadOptions::default());
        let w = w.map_err(|e| TestCaseError::fail(format!("{spec}: {e}")))?;
        prop_assert_eq!(w.spec(), spec);
    }

    #[test]
    fn model_specs_print_back_as_given(
        entry in prop::sample::select(concur::model::REGISTRY.iter().map(|e| (e.name, e.takes_workers)).collect::<Vec<_>>()),
        workers in 1..=concur::model::MAX_WORKERS,
    ) {
        let (name, takes_workers) = entry;
        let spec = if takes_workers { format!("{name}:{workers}") } else { name.to_string() };
        let m = concur::model::parse(&spec).map_err(|e| TestCaseError::fail(format!("{spec}: {e}")))?;
        prop_assert_eq!(m.spec(), spec.clone());
        prop_assert_eq!(m.workers(), takes_workers.then_some(workers));
    }

    #[test]
    fn grammar_shaped_specs_are_stable_or_refused(
        name in prop::sample::select(vec!["fib", "spin", "sleep", "mail", "read", "crash", "http", "cmd", "seq", "pool", "rayon", "async", "async-local", "thread", "green", "curl"]),
        arg in prop::option::of("[0-9a-z.:x/?&={}-]{0,12}"),
    ) {
        // Arbitrary arguments need not be canonical: what is accepted must print a spec that
        // parses to itself, and what is refused must say so properly.
        let spec = match &arg { Some(a) => format!("{name}:{a}"), None => name.to_string() };
        match concur::workload::parse(&spec, &WorkloadOptions::default()) {
            Ok(w) => {
                let again = concur::workload::parse(&w.spec(), &WorkloadOptions::default()).unwrap();
                prop_assert_eq!(w.spec(), again.spec());
            }
            Err(e) if concur::workload::REGISTRY.iter().any(|e| e.name == name) => {
                refused_properly(&spec, &e)?;
            }
            Err(_) => {}
        }
        if let Ok(m) = concur::model::parse(&spec) {
            prop_assert_eq!(m.spec(), concur::model::parse(&m.spec()).unwrap().spec());
            if let Some(w) = m.workers() { prop_assert!(w >= 1); }
        }
    }
}

#[test]
fn a_bad_http_url_is_a_usage_error_naming_it() {
    let e = concur::workload::parse("http:http://[::1", &WorkloadOptions::default())
        .err()
        .expect("refused");
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("'http://[::1'"), "{e}");
}

#[test]
fn fork_refuses_a_multithreaded_parent() {
    // The test harness runs tests on threads, so this process is multi-threaded.
    let _other = std::thread::spawn(std::thread::park);
    let w = concur::workload::parse("fib:5", &WorkloadOptions::default()).unwrap();
    let ctx = concur::model::RunCtx {
        workload: w,
        tasks: 2,
        recipe: concur::model::WorkloadRecipe {
            workload: "fib:5".into(),
            options: WorkloadOptions::default(),
            gil: false,
            settings: concur::plan::options::RunSettings::default(),
            jobs_backend: None,
        },
        arrivals: None,
    };
    let out = concur::model::parse("fork").unwrap().run(&ctx);
    let err = out.error.unwrap();
    assert!(err.contains("single-threaded"), "{err}");
    assert!(out.records.is_empty());
}
