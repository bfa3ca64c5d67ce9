//! The table's section for runs over several hosts (`--hub … --hosts K`): each host's part of
//! each cell's first run, the start spread and what coordinating cost, and the delay server's
//! CPU per request beside the clients'. Every run's parts are in the results file.

use crate::analysis::results::{PartStatus, RunResult, SPREAD_WARN_MS};
use crate::base::units::{fmt_kib, fmt_secs};

/// The section, or nothing when no run went over hosts.
pub fn render(runs: &[RunResult]) -> String {
    let firsts: Vec<&RunResult> = runs
        .iter()
        .filter(|r| r.hub.is_some() && r.rep == 0)
        .collect();
    if firsts.is_empty() {
        return String::new();
    }
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for r in &firsts {
        let Some(hub) = &r.hub else { continue };
        let label = r.key.label();
        for (i, p) in hub.parts.iter().enumerate() {
            let fig = p.run.as_ref();
            let behind = fig.and_then(|f| f.behind) == Some(true);
            let status = match (p.status, behind) {
                (PartStatus::Ok, false) => String::new(),
                // A generator that could not keep its share of the schedule, as BEHIND is on
                // one host.
                (PartStatus::Ok, true) => "BEHIND".into(),
                (s, _) => format!("{s:?}").to_lowercase(),
            };
            rows.push(vec![
                if i == 0 { label.clone() } else { String::new() },
                p.host.clone(),
                p.tasks.to_string(),
                fig.map_or("-".into(), |f| fmt_secs(f.wall_s)),
                fig.and_then(|f| f.latency_us)
                    .map_or("-".into(), |l| fmt_secs(l.p99 as f64 / 1e6)),
                fig.map_or("-".into(), |f| fmt_secs(f.user_s + f.sys_s)),
                fig.and_then(|f| f.tree_pss_kib).map_or("-".into(), fmt_kib),
                format!(
                    "{:+.3} ms ± {:.3}",
                    p.clock_offset_ns as f64 / 1e6,
                    p.clock_uncertainty_ns as f64 / 1e6
                ),
                p.first_task_ms
                    .map_or("-".into(), |ms| format!("{ms:+.2} ms")),
                status,
            ]);
        }
        let mut line = format!("{label}:");
        if let Some(s) = hub.start_spread_ms {
            line.push_str(&format!(" first tasks within {s:.2} ms of each other;"));
            if s > SPREAD_WARN_MS {
                notes.push(format!(
                    "! {label}: the hosts' first tasks spread over {s:.1} ms (more than {SPREAD_WARN_MS} ms): a host was slow to take its share or its clock offset is uncertain"
                ));
            }
        }
        if let Some(c) = hub.coordination_s {
            line.push_str(&format!(
                " {} from sending the work to the last host's first task;",
                fmt_secs(c)
            ));
        }
        let done = (r.tasks_ok + r.tasks_failed).max(1) as f64;
        if let (Some(host), Some(cpu)) = (&hub.server_host, hub.server_cpu_s) {
            line.push_str(&format!(
                " server on {host}: {:.1} µs CPU per request (the clients: {:.1} µs)",
                cpu * 1e6 / done,
                (r.user_s + r.sys_s) * 1e6 / done
            ));
        }
        if let Some(q) = r.queue_wait_us {
            line.push_str(&format!(
                " jobs waited {} (p50) to {} (p99) from enqueue to start;",
                fmt_secs(q.p50 as f64 / 1e6),
                fmt_secs(q.p99 as f64 / 1e6)
            ));
        }
        if hub.covered < 1.0 {
            notes.push(format!(
                "! {label}: {} tasks not performed, the row covers {:.1}% of the work",
                hub.lost_tasks,
                hub.covered * 100.0
            ));
        }
        notes.push(format!("  {}", line.trim_end_matches(';')));
    }
    let t = super::table::styled(
        &[
            "cell",
            "host",
            "tasks",
            "wall",
            "p99",
            "CPU",
            "tree PSS",
            "clock vs hub",
            "first task",
            "status",
        ],
        rows,
    );
    format!(
        "\nhosts (each cell's first run; throughput, CPU and memory of the cell rows are the hosts' sums, latency their merged histogram)\n{t}\n{}\n",
        notes.join("\n")
    )
}
