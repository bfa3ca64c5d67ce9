//! One `async:W` cell of HTTP requests run in this very process (no `concur::init()`, so the
//! lab runs the cell in-process), for a heap profiler to see every allocation of the client:
//! `bench/heap.sh` runs it under heaptrack. Usage: `http_heap URL N W`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(n), Some(w)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: http_heap URL N W");
        std::process::exit(2);
    };
    let (Ok(n), Ok(w)) = (n.parse::<usize>(), w.parse::<usize>()) else {
        eprintln!("N and W must be whole numbers, not '{n}' and '{w}'");
        std::process::exit(2);
    };
    let report = concur::Lab::new("http-heap")
        .builtin(&format!("http:{url}"))
        .models([format!("async:{w}")])
        .tasks([n])
        .repeat(1)
        .warmup(0)
        .run();
    match report {
        Ok(r) if r.failed_runs() == 0 => {}
        Ok(r) => {
            eprintln!("{} failed runs", r.failed_runs());
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
