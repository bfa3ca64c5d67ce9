// The gil study's CPU body in Go: K goroutines each running the multiply loop
// (a, b = b, a*b, wrapping) N times, on every core (Go has no interpreter lock), or the K
// calls one after another with --mode plain. Prints one CONCUR line: the work's wall and 8
// bytes a task (its result's size, as concur's spin).
//
//	go build -o gil gil.go && ./gil --mode goroutines --tasks 6 --iterations 60000000
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// spin is concur's spin: the loop with wrapping arithmetic, its result kept.
func spin(n int64) uint64 {
	a, b := uint64(3), uint64(5)
	for i := int64(0); i < n; i++ {
		a, b = b, (a*b)|1
	}
	return b
}

var sink uint64

func main() {
	mode := flag.String("mode", "goroutines", "plain or goroutines")
	tasks := flag.Int("tasks", 1, "K")
	iterations := flag.Int64("iterations", 60000000, "N")
	flag.Parse()
	t0 := time.Now()
	results := make([]uint64, *tasks)
	if *mode == "plain" {
		for i := range results {
			results[i] = spin(*iterations)
		}
	} else {
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				results[i] = spin(*iterations)
			}(i)
		}
		wg.Wait()
	}
	wall := time.Since(t0).Seconds()
	for _, r := range results {
		sink ^= r
	}
	line, _ := json.Marshal(map[string]any{
		"wall_s": wall, "bytes": 8 * *tasks, "tasks_ok": *tasks, "runtime": runtime.Version(),
	})
	fmt.Printf("CONCUR %s\n", line)
}
