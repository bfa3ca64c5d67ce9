"""The table the tasks benchmarks print (bench/java-virtual.sh, bench/tasks-cpp-mono.sh): per
row and N, from concur's results files, the median peak RSS, tree PSS, PSS per task above the
row's 1-task cell, lateness, time to start every task, CPU and failed runs."""
import json


def load(paths):
    """The cell lines of every results file in `paths`, keyed by (model, tasks) too."""
    cells = [json.loads(line) for p in paths for line in open(p)]
    cells = [c for c in cells if c["type"] == "cell"]
    return cells, {(c["model"], c["tasks"]): c for c in cells}


def mib(kib):
    return f"{kib / 1024:.1f}" if kib else "-"


def print_rows(cells):
    print("\nrow, N, peak RSS MiB, tree PSS MiB, PSS/task B, late p50/p99/max ms, start all s, CPU s, failed runs")
    for c in cells:
        w = c.get("wakeups") or {}
        late = w.get("late_us") or {}
        lat = "/".join(f"{late[k] / 1000:.1f}" for k in ("p50", "p99", "max")) if late else "-"
        per = c.get("pss_per_task_b")
        cpu = (c.get("user_median_s") or 0) + (c.get("sys_median_s") or 0)
        print(f"{c['model']:16} {c['tasks']:>7} {mib(c.get('max_rss_kib')):>7} {mib(c.get('tree_pss_kib')):>7} "
              f"{'-' if per is None else round(per):>6} {lat:>16} {w.get('start_all_s', '-')!s:>8.6} "
              f"{cpu:6.2f} {c['runs_failed']}/{c['runs']}")


def pss(by, model, n):
    """The median tree PSS of `model` at `n` tasks, KiB, or None."""
    return (by.get((model, n)) or {}).get("tree_pss_kib")
