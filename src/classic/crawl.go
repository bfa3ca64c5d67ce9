// The crawl study in Go: N GETs of the delay server, C at a time, as Go's users write it (a
// goroutine per request, a buffered channel as the semaphore, net/http's client with as many
// idle connections kept as requests in flight). Prints one CONCUR line: the work's wall,
// bytes, and requests ok and failed.
//
//	go build -o crawl crawl.go && ./crawl --url http://127.0.0.1:PORT -n 1000 -c 100 [--cafile PEM]
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	base := flag.String("url", "", "the delay server, http://HOST:PORT")
	n := flag.Int("n", 1000, "requests")
	c := flag.Int("c", 100, "requests in flight")
	delay := flag.Int("delay", 100, "the server's delay, ms")
	cafile := flag.String("cafile", "", "CA certificates to trust (PEM) instead of the system's")
	flag.Parse()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = *c
	if *cafile != "" {
		pem, err := os.ReadFile(*cafile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	rng := rand.New(rand.NewSource(42))
	letters := []byte("abcdefghijklmnopqrstuvwxyz")
	urls := make([]string, *n)
	for i := range urls {
		name := make([]byte, 10)
		for j := range name {
			name[j] = letters[rng.Intn(len(letters))]
		}
		urls[i] = fmt.Sprintf("%s/add?name=crawl%s&delay=%d", *base, name, *delay)
	}
	var ok, failed, size int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, *c)
	t0 := time.Now()
	for _, u := range urls {
		wg.Add(1)
		sem <- struct{}{}
		go func(u string) {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := client.Get(u)
			if err != nil {
				atomic.AddInt64(&failed, 1)
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				atomic.AddInt64(&failed, 1)
				return
			}
			atomic.AddInt64(&ok, 1)
			atomic.AddInt64(&size, int64(len(body)))
		}(u)
	}
	wg.Wait()
	line, _ := json.Marshal(map[string]any{
		"wall_s":       time.Since(t0).Seconds(),
		"bytes":        size,
		"tasks_ok":     ok,
		"tasks_failed": failed,
		"runtime":      runtime.Version(),
	})
	fmt.Printf("CONCUR %s\n", line)
}
