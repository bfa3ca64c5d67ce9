// The tasks study in Go: N goroutines that each wait, started all at once, as Go's users
// write it (a sync.WaitGroup, time.Sleep). Prints one CONCUR line: the goroutines that
// finished (each adds itself to an atomic counter when its wait is over), the work's wall,
// the time to start every goroutine, and how late each woke (its end after its start plus
// the wait).
//
//	go build -o tasks tasks.go && ./tasks --tasks 1000000 --wait-ms 10000
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	n := flag.Int("tasks", 1, "how many goroutines")
	waitMs := flag.Int("wait-ms", 10000, "how long each waits, ms")
	flag.Parse()
	wait := time.Duration(*waitMs) * time.Millisecond
	starts := make([]time.Duration, *n)
	late := make([]time.Duration, *n)
	var wg sync.WaitGroup
	var finished atomic.Int64
	t0 := time.Now()
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := time.Now()
			time.Sleep(wait)
			starts[i] = start.Sub(t0)
			late[i] = time.Since(start) - wait
			finished.Add(1)
		}(i)
	}
	wg.Wait()
	wall := time.Since(t0)
	var lastStart time.Duration
	for _, s := range starts {
		if s > lastStart {
			lastStart = s
		}
	}
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	q := func(p float64) int64 {
		if len(late) == 0 {
			return 0
		}
		i := int(p*float64(len(late)-1) + 0.5)
		v := late[i].Microseconds()
		if v < 0 {
			return 0
		}
		return v
	}
	// A waiting goroutine produces no bytes (concur's sleep task neither).
	line, err := json.Marshal(map[string]any{
		"wall_s":   wall.Seconds(),
		"tasks_ok": finished.Load(),
		"bytes":    0,
		"runtime":  runtime.Version(),
		"wakeups": map[string]any{
			"start_all_s": lastStart.Seconds(),
			"late_us": map[string]int64{
				"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999), "max": q(1),
			},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("CONCUR %s\n", line)
}
