//! Property tests of the spec parsers: no input makes them panic, and every spec they accept
//! prints back to a spec that parses to the same thing.

use concur::workload::WorkloadOptions;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn workload_parser_never_panics(s in "\\PC{0,40}") {
        let _ = concur::workload::parse(&s, &WorkloadOptions::default());
    }

    #[test]
    fn model_parser_never_panics(s in "\\PC{0,40}") {
        let _ = concur::model::parse(&s);
    }

    #[test]
    fn grammar_shaped_specs_round_trip(
        name in prop::sample::select(vec!["fib", "spin", "sleep", "mail", "read", "crash", "seq", "pool", "rayon", "async", "async-local", "thread"]),
        arg in prop::option::of("[0-9a-z.:x/-]{0,12}"),
    ) {
        let spec = match &arg { Some(a) => format!("{name}:{a}"), None => name.to_string() };
        if let Ok(w) = concur::workload::parse(&spec, &WorkloadOptions::default()) {
            let again = concur::workload::parse(&w.spec(), &WorkloadOptions::default()).unwrap();
            prop_assert_eq!(w.spec(), again.spec());
        }
        if let Ok(m) = concur::model::parse(&spec) {
            prop_assert_eq!(m.spec(), concur::model::parse(&m.spec()).unwrap().spec());
            if let Some(w) = m.workers() { prop_assert!(w >= 1); }
        }
    }
}

#[test]
fn fork_refuses_a_multithreaded_parent() {
    // The test harness runs tests on threads, so this process is multi-threaded.
    let _other = std::thread::spawn(std::thread::park);
    let w = concur::workload::parse("fib:5", &WorkloadOptions::default()).unwrap();
    let ctx = concur::model::RunCtx {
        workload: w,
        tasks: 2,
        env: concur::model::TaskEnv {
            workload: "fib:5".into(),
            options: WorkloadOptions::default(),
            gil: false,
            switch_interval_us: 5000,
            jobs_backend: None,
        },
        stack_size: 1 << 20,
    };
    let out = concur::model::parse("fork").unwrap().run(&ctx);
    let err = out.error.unwrap();
    assert!(err.contains("single-threaded"), "{err}");
    assert!(out.records.is_empty());
}
