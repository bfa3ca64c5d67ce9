//! Compare a function of yours with a saved baseline, as `--save-baseline` and `--baseline`
//! do on the command line: the first run saves `concur-results/baselines/NAME.jsonl`, the
//! second (here: the same work with a smaller pool) is compared with it.
//!
//! `cargo run --release --example baseline`

use concur::Lab;

fn work(i: usize) -> u64 {
    (0..300_000u64).fold(i as u64, |a, x| a.rotate_left(5) ^ x) % 13
}

fn main() -> Result<(), concur::Error> {
    concur::init();
    let lab = |name: &str| Lab::new(name).task(work).tasks([8]).repeat(5).warmup(0);
    lab("work")
        .models(["seq", "pool:2"])
        .save_baseline("example-work")
        .run()?;
    // The "after" run: the same cells, compared run by run (Mann-Whitney U) with the saved
    // ones; the verdicts are in the report's comparison and at the end of its table.
    let after = lab("work")
        .models(["seq", "pool:2"])
        .baseline("example-work")
        .run()?;
    after.print()?;
    if let Some(c) = &after.comparison {
        for change in &c.changes {
            println!(
                "{}: {:.3}× the baseline's median (p = {:.3}): {}",
                change.key.label(),
                change.ratio,
                change.p,
                change.verdict.word()
            );
        }
    }
    Ok(())
}
