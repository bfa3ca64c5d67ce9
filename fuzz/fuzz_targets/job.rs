//! A job payload as read from Redis or SQLite (`jobs::Job::parse`): no panic, and an accepted
//! job written back (`Job::to_json`, as it is pushed again after a failure) reads back to the
//! same job.
#![no_main]
use concur::jobs::Job;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &str| {
    if let Ok(job) = Job::parse(raw) {
        let json = job.to_json();
        let again = Job::parse(&json).unwrap_or_else(|e| panic!("{json} is refused: {e}"));
        assert_eq!(again, job, "{raw:?} -> {json}");
        let _ = job.max_retries();
    }
});
