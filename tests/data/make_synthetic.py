#!/usr/bin/env python3
"""Writes the synthetic results files the report tests use (base.jsonl, new.jsonl): fixed
numbers, so renderings of them are stable. Against base, new has seq unchanged, thread 30%
faster and pool:2 30% slower. Run from this folder; the files are committed."""
import json

META = {"type": "meta", "schema": 1, "concur": "0.1.0", "started": "2026-01-01T00:00:00Z",
        "machine": {"cpu": "Synthetic CPU", "cores": 2, "kernel": "6.0.0", "load1": 0.0,
                    "governor": None, "mem_total_kib": 8000000, "cpu_busy": 0.01},
        "command": ["concur", "run", "-w", "spin:1000000", "-m", "seq", "-m", "thread", "-m", "pool:2", "-n", "4", "-r", "5"],
        "notes": []}
# Per-run wall offsets: a fixed spread around each cell's median.
SPREAD = [1.00, 0.98, 1.03, 0.99, 1.02]

def traits(workload, model, nature, delay_s):
    """The cell traits concur records on every run line (decided from the workload and model)."""
    family = model.split(":")[0]
    return {"nature": nature, "delay_s": delay_s, "waits": nature in ("delay", "net"),
            "http": workload.startswith("http:"), "family": family, "baseline": family == "seq",
            "task_processes": family in ("fork", "spawn", "jobs-procs"),
            "queue": family.startswith("jobs"), "expected_failure": False,
            "isolation": "fresh-process"}

def run(model, workers, par, tasks, rep, wall, cpu_per_wall):
    task = wall / (tasks / min(par, 2)) if model != "seq" else wall / tasks
    timeline = None
    if rep == 0:
        timeline = []
        slots = [0.0] * min(par, tasks)
        for i in range(tasks):
            j = slots.index(min(slots))
            start = slots[j]
            timeline.append([int(start * 1e6), int((start + task) * 1e6)])
            slots[j] = start + task
        timeline.sort()
    cpu = wall * cpu_per_wall
    line = {"type": "run", "study": "custom", "workload": "spin:1000000", "model": model,
            "tasks": tasks, "gil": False, "workers": workers, "parallelism": par, "nature": "cpu",
            "delay_s": None, "rep": rep, "status": "ok", "wall_s": round(wall, 6),
            "user_s": round(cpu * 0.95, 6), "sys_s": round(cpu * 0.05, 6),
            "max_rss_kib": 4000 + 100 * par, "tree_pss_kib": 1500 + 50 * par,
            "ctx_voluntary": 10, "ctx_involuntary": 2, "threads_created": par if model != "seq" else 0,
            "processes_created": 0, "tasks_ok": tasks, "tasks_failed": 0, "failures": {},
            "bytes": 8 * tasks, "gil_switches": 0, "error": None, "server_peak_in_flight": None,
            "latency_us": {"p50": int(task * 1e6), "p90": int(task * 1.1e6), "p99": int(task * 1.2e6),
                           "p999": int(task * 1.2e6), "max": int(task * 1.25e6)}}
    line.update(traits("spin:1000000", model, "cpu", None))
    line["pid"] = 1000 + rep * 10 + len(model)
    if timeline is not None:
        line["timeline_us"] = timeline
    return line

def write(path, walls):
    with open(path, "w") as f:
        f.write(json.dumps(META) + "\n")
        for rep in range(5):
            for (model, workers, par, cpw), wall in zip(CELLS, walls):
                k = SPREAD[rep] if model != "seq" or path == "base.jsonl" else SPREAD[(rep + 1) % 5]
                f.write(json.dumps(run(model, workers, par, 4, rep, wall * k, cpw)) + "\n")

CELLS = [("seq", None, 1, 1.0), ("thread", None, 4, 1.9), ("pool:2", 2, 2, 1.9)]
write("base.jsonl", [0.400, 0.300, 0.210])
write("new.jsonl", [0.400, 0.210, 0.273])

# quoting.jsonl: specs and errors holding the characters CSV must quote (`,`, `"`) or that
# other formats treat specially (`&`, `:`, `|`), with three runs per cell so the median is one
# of them. Its numbers are arbitrary but fixed.
QUOTING = [
    # (workload, model, workers, par, nature, delay_s, walls, error)
    ("http:/add?a=1,2&delay=1", "seq", None, 1, "delay", 0.001, [0.012, 0.010, 0.011], None),
    ("http:/add?a=1,2&delay=1", "pool:2", 2, 2, "delay", 0.001, [0.007, 0.006, 0.008], None),
    ('read:/tmp/a "b",c|d:1024x1', "seq", None, 1, "io", None, [0.003, 0.002, 0.004],
     'read failed: "/tmp/a \\"b\\",c|d": No such file, or directory'),
]

def quoting_run(workload, model, workers, par, nature, delay_s, rep, wall, error):
    ok = 0 if error else 2
    return {"type": "run", "study": "custom", "workload": workload, "model": model, "tasks": 2,
            "gil": False, "workers": workers, "parallelism": par, "nature": nature,
            "delay_s": delay_s, "rep": rep, "status": "failed" if error else "ok",
            "wall_s": wall, "user_s": round(wall / 4, 6), "sys_s": round(wall / 8, 6),
            "max_rss_kib": 5000 + rep, "tree_pss_kib": 2000 + rep, "ctx_voluntary": 4,
            "ctx_involuntary": 1, "threads_created": 0 if model == "seq" else 2,
            "processes_created": 0, "tasks_ok": ok, "tasks_failed": 2 - ok,
            "failures": {"io": 2} if error else {}, "bytes": 0 if error else 20,
            "gil_switches": 0, "error": error,
            "latency_us": None if error else {"p50": 5000, "p90": 5500, "p99": 6000, "p999": 6000, "max": 6000},
            "server_peak_in_flight": None if error or nature != "delay" else par,
            "pid": 2000 + rep * 10 + len(model), **traits(workload, model, nature, delay_s)}

with open("quoting.jsonl", "w") as f:
    meta = dict(META, command=["concur", "run", "-w", "http:/add?a=1,2&delay=1"])
    f.write(json.dumps(meta) + "\n")
    for rep in range(3):
        for (w, m, workers, par, nature, delay_s, walls, error) in QUOTING:
            f.write(json.dumps(quoting_run(w, m, workers, par, nature, delay_s, rep, walls[rep], error)) + "\n")
