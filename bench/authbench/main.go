// authbench: put or range load through etcd's own Go client (clientv3
// 3.4, grpc-go) logged in with a user and password, as a Go application
// with auth on runs: the client authenticates at dial and sends its token
// with every request (and re-authenticates when told the token is
// invalid).  For bench/auth.sh (BENCH_CLIENT=go); prints one line
//   RESULT qps=Q p50_ms=A p99_ms=B errors=E
// in cetcd-bench's format.  Built in GOPATH mode against Debian's etcd 3.4
// client sources by build.sh (no network).
//
// usage: authbench --endpoints HOST:PORT [--user NAME:PASSWORD]
//        [--conns 4] [--clients 16] [--total 10000]
//        [--key-space 100000] [--val-size 256] put|range [KEY]
// range reads KEY (default bench-k) serializably unless --linearizable.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/clientv3"
)

func fatalf(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "authbench: "+f+"\n", a...)
	os.Exit(2)
}

func main() {
	ep := flag.String("endpoints", "127.0.0.1:2379", "one endpoint")
	user := flag.String("user", "", "NAME:PASSWORD (empty: no auth)")
	conns := flag.Int("conns", 4, "clients (gRPC connections)")
	clients := flag.Int("clients", 16, "requests in flight")
	total := flag.Int("total", 10000, "requests")
	keySpace := flag.Int("key-space", 100000, "put: keys")
	valSize := flag.Int("val-size", 256, "put: value bytes")
	lin := flag.Bool("linearizable", false, "range: linearizable")
	flag.Parse()
	if flag.NArg() < 1 || (flag.Arg(0) != "put" && flag.Arg(0) != "range") {
		fatalf("usage: authbench [flags] put|range [KEY]")
	}
	op, key := flag.Arg(0), "bench-k"
	if flag.NArg() > 1 {
		key = flag.Arg(1)
	}
	if *conns < 1 || *clients < 1 || *total < 1 || *keySpace < 1 {
		fatalf("--conns, --clients, --total and --key-space must be >= 1")
	}
	cfg := clientv3.Config{Endpoints: []string{*ep},
		DialTimeout: 10 * time.Second}
	if *user != "" {
		i := strings.IndexByte(*user, ':')
		if i < 0 {
			fatalf("--user wants NAME:PASSWORD")
		}
		cfg.Username, cfg.Password = (*user)[:i], (*user)[i+1:]
	}
	clis := make([]*clientv3.Client, *conns)
	for i := range clis {
		c, err := clientv3.New(cfg) // authenticates here with a user
		if err != nil {
			fatalf("connect %s: %v", *ep, err)
		}
		clis[i] = c
	}
	val := strings.Repeat("v", *valSize)
	var next, errs int64
	lat := make([][]time.Duration, *clients)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cli := clis[w%len(clis)]
			rnd := rand.New(rand.NewSource(int64(w)))
			for atomic.AddInt64(&next, 1) <= int64(*total) {
				t0 := time.Now()
				var err error
				ctx, cancel := context.WithTimeout(context.Background(),
					30*time.Second)
				if op == "put" {
					k := fmt.Sprintf("%08d", rnd.Intn(*keySpace))
					_, err = cli.Put(ctx, k, val)
				} else if *lin {
					_, err = cli.Get(ctx, key)
				} else {
					_, err = cli.Get(ctx, key, clientv3.WithSerializable())
				}
				cancel()
				if err != nil {
					atomic.AddInt64(&errs, 1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	took := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(p*float64(len(all)-1))]) / 1e6
	}
	fmt.Printf("RESULT qps=%.1f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
		float64(len(all))/took.Seconds(), pct(0.50), pct(0.99), errs)
	for _, c := range clis {
		c.Close()
	}
}
