// The gil study's CPU body in Go: K goroutines each running the multiply loop
// (a, b = b, a*b, wrapping) N times, on every core (Go has no interpreter lock), or the K
// calls one after another with --mode plain. Prints one CONCUR line: the work's wall, the
// calls that returned (each adds itself to an atomic counter) and the bytes they produced,
// summed: each result's size, 8 bytes, as concur's spin.
//
//	go build -o gil gil.go && ./gil --mode goroutines --tasks 6 --iterations 60000000
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
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

// work is one call: its result kept, the call and the result's bytes counted.
func work(n int64, result *uint64, done, bytes *atomic.Int64) {
	*result = spin(n)
	done.Add(1)
	bytes.Add(int64(binary.Size(*result)))
}

func main() {
	mode := flag.String("mode", "goroutines", "plain or goroutines")
	tasks := flag.Int("tasks", 1, "K")
	iterations := flag.Int64("iterations", 60000000, "N")
	flag.Parse()
	t0 := time.Now()
	results := make([]uint64, *tasks)
	var done, bytes atomic.Int64
	if *mode == "plain" {
		for i := range results {
			work(*iterations, &results[i], &done, &bytes)
		}
	} else {
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				work(*iterations, &results[i], &done, &bytes)
			}(i)
		}
		wg.Wait()
	}
	wall := time.Since(t0).Seconds()
	for _, r := range results {
		sink ^= r
	}
	line, _ := json.Marshal(map[string]any{
		"wall_s": wall, "bytes": bytes.Load(), "tasks_ok": done.Load(), "runtime": runtime.Version(),
	})
	fmt.Printf("CONCUR %s\n", line)
}
