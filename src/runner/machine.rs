//! The machine a study runs on, as recorded in every results file, and the wall-clock time.

use crate::analysis::results::Machine;
use crate::model::cores;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The machine now: CPU model, cores, kernel, load, governor, memory.
pub fn machine() -> Machine {
    let cpu = read("/proc/cpuinfo")
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let load1 = read("/proc/loadavg")
        .and_then(|t| t.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0);
    let mem_total_kib = read("/proc/meminfo").and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    });
    Machine {
        cpu,
        cores: cores(),
        kernel: read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
        load1,
        governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        mem_total_kib,
        cpu_busy: busy_fraction(std::time::Duration::from_millis(250)),
    }
}

pub use crate::base::units::now_rfc3339;

/// Busy and total jiffies over all CPUs, from the first line of `/proc/stat`.
fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = read("/proc/stat")?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = fields.iter().take(8).sum();
    // idle and iowait are the 4th and 5th fields.
    let idle = fields.get(3)? + fields.get(4).unwrap_or(&0);
    Some((total - idle, total))
}

/// The fraction of the machine's CPU time (0 to 1) spent busy over `window`, measured now.
/// Unlike the load average, which lags by minutes (and counts the 10,000 runnable threads of a
/// study's own previous run), this says whether other work is running right now.
pub fn busy_fraction(window: std::time::Duration) -> Option<f64> {
    let (b0, t0) = cpu_jiffies()?;
    std::thread::sleep(window);
    let (b1, t1) = cpu_jiffies()?;
    let total = t1.checked_sub(t0).filter(|t| *t > 0)?;
    Some(b1.saturating_sub(b0) as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_dates() {
        assert_eq!(crate::base::units::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            crate::base::units::rfc3339(951_782_400),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            crate::base::units::rfc3339(1_796_000_000),
            "2026-11-30T00:53:20Z"
        );
    }

    #[test]
    fn machine_has_cores_and_kernel() {
        let m = crate::runner::machine::machine();
        // The CPUs this process may run on, asked of the kernel directly: a fallback to 1
        // (or any other count) on a machine of several cores fails here.
        // SAFETY: a zeroed cpu_set_t is a valid empty set, filled by the call.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
        let allowed = unsafe { libc::CPU_COUNT(&set) } as usize;
        assert_eq!(m.cores, allowed);
        // SAFETY: utsname is plain bytes, filled by uname.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::uname(&mut u) }, 0);
        let release = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
        assert_eq!(m.kernel, release.to_str().unwrap());
    }
}
