//! The fallback executor of a library user's binary that did not call [`crate::init`]: each
//! run happens inside the calling process, measured by `getrusage` before and after and by
//! sampling the process's own PSS. Runtimes, pools and the allocator carry over between runs
//! (what fresh processes exist to prevent) and `--timeout` cannot stop a run, so the results
//! say `"isolation": "in-process"` and the lab warns once.

use std::time::Instant;

use crate::analysis::results::{Isolation, Machine, RunResult};
use crate::measure::memory::TreeSampler;
use crate::measure::rusage::{self_usage, usage_between};
use crate::plan::{CellPlan, Plan};
use crate::runner::supervise::Ended;
use crate::runner::{child, machine};
use crate::runner::{convert, request, run_hook, Executor, Hook, Iteration};

/// Runs every cell in the calling process.
pub struct InProcessExecutor;

impl Executor for InProcessExecutor {
    fn machine(&self) -> Machine {
        machine::machine()
    }

    fn run(&self, plan: &Plan, cell: &CellPlan, iteration: Iteration) -> RunResult {
        let started = Instant::now();
        let sampler = TreeSampler::start(std::process::id() as i32, None);
        let before = self_usage();
        let report = child::run_cell(request(plan, cell, iteration));
        let after = self_usage();
        let pss = sampler.finish();
        let (report, stderr_tail) = match report {
            Ok(r) => (Some(r), Vec::new()),
            Err(e) => (None, vec![e.to_string()]),
        };
        let ended = Ended {
            waited: Ok(usage_between(&before, &after)),
            killed_for: None,
            wall_s: started.elapsed().as_secs_f64(),
            pss,
            report,
            stderr_tail,
            concur_line: None,
        };
        let mut run = convert::judge(cell, iteration.rep(), Ok(ended), plan.timeout);
        run.isolation = Isolation::InProcess;
        run
    }

    fn interrupted(&self) -> bool {
        crate::os::interrupt::interrupted()
    }

    fn hook(&self, plan: &Plan, cell: &CellPlan, hook: Hook) -> std::result::Result<(), String> {
        run_hook(plan, cell, hook)
    }
}
