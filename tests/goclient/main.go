// goclient: the recipes of etcd's official Go client (clientv3 3.4, the
// client etcdctl, Kubernetes and most Go programs use) run against a
// server, each checking the guarantee it promises its users.
//
//	mutex     concurrency.Mutex: sessions lock, append their id to a list
//	          with a txn guarded by IsOwner, unlock; never two holders at
//	          once, every id once, no fenced write refused
//	election  concurrency.Election: candidates campaign, proclaim, resign;
//	          one leader at a time, every candidate leads, Leader() and an
//	          observer agree with who leads
//	stm       concurrency.NewSTM bank transfers under SerializableSnapshot
//	          and Serializable: every snapshot read sums to the total
//	leasing   leasing.NewKV caches on two clients: each reads the other's
//	          last write at once (the lease is revoked on every write)
//	mirror    mirror.Syncer: base copy plus updates equal the source after
//	          concurrent puts and deletes
//	namespace namespace.NewKV/NewWatcher: keys carry the prefix on the
//	          server, not in answers or events
//	kube      Kubernetes' apiserver storage patterns: CAS txns, paginated
//	          lists, an informer's watch cache with progress notify and
//	          RequestProgress, the compactor, a relist after compaction
//
// With -faults (members killed meanwhile; mutex, stm and kube only) errors
// are retried and only each recipe's safety is checked.
//
// usage: goclient -endpoints 127.0.0.1:2379 [-faults] [check ...]
// Prints "ok <check> <details>" or "FAIL <check> <why>"; exit 1 on a FAIL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	"go.etcd.io/etcd/clientv3/leasing"
	"go.etcd.io/etcd/clientv3/mirror"
	"go.etcd.io/etcd/clientv3/namespace"
	"go.etcd.io/etcd/etcdserver/api/v3rpc/rpctypes"
	"go.etcd.io/etcd/mvcc/mvccpb"
)

var endpoints []string

// faults: members are killed under the client; errors are retried and only
// the safety of each recipe is checked (-faults).
var faults bool

func client() *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	return c
}

func ctxT(d time.Duration) context.Context {
	ctx, _ := context.WithTimeout(context.Background(), d) //nolint
	return ctx
}

// setPut puts a check's starting value, with -faults up to 50 times (the
// put sets a value, so doing it twice is harmless).
func setPut(fe *firstErr, c *clientv3.Client, key, val string) error {
	return fe.again(50, func() error {
		_, err := c.Put(ctxT(10*time.Second), key, val)
		return err
	})
}

// firstErr keeps the first error any goroutine of a check reports, and
// counts the errors retried with -faults.
type firstErr struct {
	mu      sync.Mutex
	err     error
	retried int64
}

func (f *firstErr) set(format string, a ...interface{}) {
	f.mu.Lock()
	if f.err == nil {
		f.err = fmt.Errorf(format, a...)
	}
	f.mu.Unlock()
}

func (f *firstErr) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// retry: with -faults the error is counted and the caller tries again after
// 100 ms (true); without, it is the check's failure (false).
func (f *firstErr) retry(format string, a ...interface{}) bool {
	if !faults {
		f.set(format, a...)
		return false
	}
	atomic.AddInt64(&f.retried, 1)
	time.Sleep(100 * time.Millisecond)
	return true
}

// again runs fn until it succeeds; with -faults up to tries more times,
// 200 ms apart, each error counted.
func (f *firstErr) again(tries int, fn func() error) error {
	for try := 0; ; try++ {
		err := fn()
		if err == nil || !faults || try == tries {
			return err
		}
		atomic.AddInt64(&f.retried, 1)
		time.Sleep(200 * time.Millisecond)
	}
}

// checkMutex: each critical section appends its id to a list kept in one
// key (read, pause, write guarded by IsOwner), so two holders at once would
// lose an id.  With -faults an error (a member killed under the client) is
// retried: an id whose write's answer was lost may be there once or not at
// all, a write refused because the session's lease ran out is not a
// violation; every acknowledged id must be there exactly once.
func checkMutex() (string, error) {
	workers, rounds := 6, 25
	if faults {
		rounds = 60
	}
	var fe firstErr
	var holders int32
	var refused int64
	acked := make(map[string]bool)
	maybe := make(map[string]bool)
	var mu sync.Mutex
	list := "/goclient/mutex/list"
	cli := client()
	defer cli.Close()
	if err := setPut(&fe, cli, list, ""); err != nil {
		return "", err
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := client()
			defer c.Close()
			var s *concurrency.Session
			for i := 0; i < rounds && fe.get() == nil; {
				if s == nil {
					var err error
					s, err = concurrency.NewSession(c,
						concurrency.WithTTL(5))
					if err != nil {
						s = nil
						if !fe.retry("worker %d session: %v", w, err) {
							return
						}
						continue
					}
				}
				select {
				case <-s.Done(): // the lease is gone: a new session
					s.Close()
					s = nil
					continue
				default:
				}
				m := concurrency.NewMutex(s, "/goclient/mutex/lock")
				if err := m.Lock(ctxT(30 * time.Second)); err != nil {
					if !fe.retry("worker %d lock: %v", w, err) {
						return
					}
					m.Unlock(ctxT(5 * time.Second))
					continue
				}
				if n := atomic.AddInt32(&holders, 1); n != 1 && !faults {
					fe.set("worker %d: %d holders at once", w, n)
				}
				id := fmt.Sprintf("w%d.%d", w, i)
				g, err := c.Get(ctxT(5*time.Second), list)
				if err != nil || len(g.Kvs) != 1 {
					atomic.AddInt32(&holders, -1)
					if !fe.retry("worker %d get: %v", w, err) {
						return
					}
					m.Unlock(ctxT(5 * time.Second))
					continue
				}
				time.Sleep(time.Duration(rand.Intn(2000)) * time.Microsecond)
				t, err := c.Txn(ctxT(5 * time.Second)).If(m.IsOwner()).
					Then(clientv3.OpPut(list,
						string(g.Kvs[0].Value)+" "+id)).Commit()
				atomic.AddInt32(&holders, -1)
				mu.Lock()
				switch {
				case err != nil:
					maybe[id] = true
				case t.Succeeded:
					acked[id] = true
				default:
					atomic.AddInt64(&refused, 1)
				}
				mu.Unlock()
				if err == nil && !t.Succeeded && !faults {
					fe.set("worker %d: fenced put refused while holding"+
						" the lock", w)
				}
				if err != nil && !fe.retry("worker %d put: %v", w, err) {
					return
				}
				i++
				if err := m.Unlock(ctxT(5 * time.Second)); err != nil {
					if !fe.retry("worker %d unlock: %v", w, err) {
						return
					}
				}
			}
			if s != nil {
				s.Close()
			}
		}(w)
	}
	wg.Wait()
	if err := fe.get(); err != nil {
		return "", err
	}
	g, err := cli.Get(ctxT(30*time.Second), list)
	if err != nil {
		return "", err
	}
	seen := make(map[string]bool)
	for _, id := range strings.Fields(string(g.Kvs[0].Value)) {
		if seen[id] {
			return "", fmt.Errorf("%s written twice", id)
		}
		if !acked[id] && !maybe[id] {
			return "", fmt.Errorf("%s in the list but never written", id)
		}
		seen[id] = true
	}
	for id := range acked {
		if !seen[id] {
			return "", fmt.Errorf("acknowledged %s lost: two holders at"+
				" once (%d acknowledged, %d in the list)", id, len(acked),
				len(seen))
		}
	}
	if !faults && len(seen) != workers*rounds {
		return "", fmt.Errorf("%d ids after %d locked writes", len(seen),
			workers*rounds)
	}
	if !faults {
		left, err := cli.Get(ctxT(5*time.Second), "/goclient/mutex/lock/",
			clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return "", err
		}
		if left.Count != 0 {
			return "", fmt.Errorf("%d lock keys left after every unlock",
				left.Count)
		}
	}
	return fmt.Sprintf("%d workers: %d acknowledged, %d unknown, %d refused"+
		" (lease lost), %d errors retried", workers, len(acked), len(maybe),
		refused, fe.retried), nil
}

func checkElection() (string, error) {
	const candidates = 5
	pfx := "/goclient/election"
	var fe firstErr
	var leading int32
	var mu sync.Mutex
	var led []string
	obsCli := client()
	defer obsCli.Close()
	obsSess, err := concurrency.NewSession(obsCli)
	if err != nil {
		return "", err
	}
	defer obsSess.Close()
	obsCtx, stopObs := context.WithCancel(context.Background())
	observed := make(map[string]bool)
	obsDone := make(chan struct{})
	go func() {
		defer close(obsDone)
		for r := range concurrency.NewElection(obsSess, pfx).Observe(obsCtx) {
			if len(r.Kvs) > 0 {
				mu.Lock()
				observed[string(r.Kvs[0].Value)] = true
				mu.Unlock()
			}
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < candidates; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := client()
			defer c.Close()
			s, err := concurrency.NewSession(c, concurrency.WithTTL(10))
			if err != nil {
				fe.set("session: %v", err)
				return
			}
			defer s.Close()
			e := concurrency.NewElection(s, pfx)
			name := fmt.Sprintf("c%d", i)
			if err := e.Campaign(ctxT(60*time.Second), name); err != nil {
				fe.set("%s campaign: %v", name, err)
				return
			}
			if n := atomic.AddInt32(&leading, 1); n != 1 {
				fe.set("%s: %d leaders at once", name, n)
			}
			mu.Lock()
			led = append(led, name)
			mu.Unlock()
			final := name + "-proclaimed"
			if err := e.Proclaim(ctxT(5*time.Second), final); err != nil {
				fe.set("%s proclaim: %v", name, err)
			}
			l, err := e.Leader(ctxT(5 * time.Second))
			if err != nil || len(l.Kvs) == 0 ||
				string(l.Kvs[0].Value) != final {
				fe.set("%s: Leader() = %v, %v while leading", name, l, err)
			}
			// Let the observer see this leader before stepping down.
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				seen := observed[final]
				mu.Unlock()
				if seen {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			atomic.AddInt32(&leading, -1)
			if err := e.Resign(ctxT(5 * time.Second)); err != nil {
				fe.set("%s resign: %v", name, err)
			}
		}(i)
	}
	wg.Wait()
	stopObs()
	<-obsDone
	if err := fe.get(); err != nil {
		return "", err
	}
	if len(led) != candidates {
		return "", fmt.Errorf("%d of %d candidates led", len(led), candidates)
	}
	for _, n := range led {
		if !observed[n+"-proclaimed"] {
			return "", fmt.Errorf("the observer never saw %s's proclamation"+
				" (saw %v)", n, observed)
		}
	}
	return fmt.Sprintf("%d leaders in turn: %s", candidates,
		strings.Join(led, " ")), nil
}

func checkSTM() (string, error) {
	const accounts, initial, workers = 8, 100, 6
	transfers := 40
	if faults {
		transfers = 150
	}
	var details []string
	for _, iso := range []concurrency.Isolation{
		concurrency.SerializableSnapshot, concurrency.Serializable} {
		cli := client()
		pfx := fmt.Sprintf("/goclient/stm%d/", iso)
		key := func(i int) string { return fmt.Sprintf("%sacct%02d", pfx, i) }
		var fe firstErr
		for i := 0; i < accounts; i++ {
			if err := setPut(&fe, cli, key(i), strconv.Itoa(initial)); err != nil {
				cli.Close()
				return "", err
			}
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		audits := int64(0)
		auditDone := make(chan struct{})
		go func() { // auditor: every snapshot sums to the total
			defer close(auditDone)
			for first := true; ; first = false {
				select {
				case <-stop:
					if !first { // at least one audit, however short the run
						return
					}
				default:
				}
				sum := 0
				_, err := concurrency.NewSTM(cli, func(s concurrency.STM) error {
					sum = 0
					for i := 0; i < accounts; i++ {
						v, _ := strconv.Atoi(s.Get(key(i)))
						sum += v
					}
					return nil
				}, concurrency.WithIsolation(iso))
				if err != nil {
					if !fe.retry("audit: %v", err) {
						return
					}
					continue
				}
				if sum != accounts*initial {
					fe.set("a snapshot summed to %d, not %d", sum,
						accounts*initial)
				}
				atomic.AddInt64(&audits, 1)
			}
		}()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				r := rand.New(rand.NewSource(int64(w)))
				for t := 0; t < transfers; t++ {
					from, to := r.Intn(accounts), r.Intn(accounts)
					if from == to {
						continue
					}
					amt := r.Intn(20) + 1
					_, err := concurrency.NewSTM(cli,
						func(s concurrency.STM) error {
							a, _ := strconv.Atoi(s.Get(key(from)))
							b, _ := strconv.Atoi(s.Get(key(to)))
							if a < amt {
								return nil
							}
							s.Put(key(from), strconv.Itoa(a-amt))
							s.Put(key(to), strconv.Itoa(b+amt))
							return nil
						}, concurrency.WithIsolation(iso))
					// Done or not, an error leaves the sum whole.
					if err != nil &&
						!fe.retry("worker %d transfer: %v", w, err) {
						return
					}
				}
			}(w)
		}
		wg.Wait()
		close(stop)
		<-auditDone // its last audit ends before the client closes
		g, err := cli.Get(ctxT(30*time.Second), pfx, clientv3.WithPrefix())
		cli.Close()
		if err != nil {
			return "", err
		}
		if e := fe.get(); e != nil {
			return "", fmt.Errorf("isolation %d: %v", iso, e)
		}
		sum := 0
		for _, kv := range g.Kvs {
			v, _ := strconv.Atoi(string(kv.Value))
			if v < 0 {
				return "", fmt.Errorf("%s went negative: %d", kv.Key, v)
			}
			sum += v
		}
		if sum != accounts*initial {
			return "", fmt.Errorf("isolation %d: final sum %d", iso, sum)
		}
		if audits == 0 {
			return "", fmt.Errorf("isolation %d: no audit finished", iso)
		}
		details = append(details, fmt.Sprintf("isolation %d: %d audits, %d"+
			" errors retried", iso, audits, fe.retried))
	}
	return strings.Join(details, ", "), nil
}

func checkLeasing() (string, error) {
	const rounds = 60
	ca, cb, plain := client(), client(), client()
	defer ca.Close()
	defer cb.Close()
	defer plain.Close()
	ka, closeA, err := leasing.NewKV(ca, "/goclient/leases/")
	if err != nil {
		return "", err
	}
	defer closeA()
	kb, closeB, err := leasing.NewKV(cb, "/goclient/leases/")
	if err != nil {
		return "", err
	}
	defer closeB()
	key := "/goclient/leasing/k"
	kvs := []clientv3.KV{ka, kb}
	for i := 0; i < rounds; i++ {
		w, r := kvs[i%2], kvs[(i+1)%2]
		val := "v" + strconv.Itoa(i)
		if _, err := w.Put(ctxT(10*time.Second), key, val); err != nil {
			return "", fmt.Errorf("round %d put: %v", i, err)
		}
		for _, kv := range []clientv3.KV{r, w, plain} {
			g, err := kv.Get(ctxT(10*time.Second), key)
			if err != nil {
				return "", fmt.Errorf("round %d get: %v", i, err)
			}
			if len(g.Kvs) != 1 || string(g.Kvs[0].Value) != val {
				return "", fmt.Errorf("round %d: read %v after the other"+
					" client wrote %s", i, g.Kvs, val)
			}
		}
		if i%10 == 9 { // deletes revoke cached leases too
			if _, err := r.Delete(ctxT(10*time.Second), key); err != nil {
				return "", err
			}
			g, err := w.Get(ctxT(10*time.Second), key)
			if err != nil || len(g.Kvs) != 0 {
				return "", fmt.Errorf("round %d: %v, %v after a delete",
					i, g, err)
			}
		}
	}
	return fmt.Sprintf("%d rounds of cached reads after the other's write",
		rounds), nil
}

func checkMirror() (string, error) {
	cli := client()
	defer cli.Close()
	src := "/goclient/mirror/"
	for i := 0; i < 300; i++ {
		if _, err := cli.Put(ctxT(5*time.Second),
			fmt.Sprintf("%s%04d", src, i), "base"); err != nil {
			return "", err
		}
	}
	s := mirror.NewSyncer(cli, src, 0)
	copyOf := map[string]string{}
	rch, ech := s.SyncBase(ctxT(30 * time.Second))
	for r := range rch {
		for _, kv := range r.Kvs {
			copyOf[string(kv.Key)] = string(kv.Value)
		}
	}
	if err := <-ech; err != nil {
		return "", fmt.Errorf("SyncBase: %v", err)
	}
	based := len(copyOf)
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	wch := s.SyncUpdates(wctx)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 200; i++ {
			k := fmt.Sprintf("%s%04d", src, rand.Intn(400))
			var err error
			if i%4 == 3 {
				_, err = cli.Delete(ctxT(5*time.Second), k)
			} else {
				_, err = cli.Put(ctxT(5*time.Second), k, "u"+strconv.Itoa(i))
			}
			if err != nil {
				done <- err
				return
			}
		}
		_, err := cli.Put(ctxT(5*time.Second), src+"zzzz-end", "end")
		done <- err
	}()
	for {
		wr, ok := <-wch
		if !ok {
			return "", errors.New("SyncUpdates ended early")
		}
		if wr.Err() != nil {
			return "", fmt.Errorf("SyncUpdates: %v", wr.Err())
		}
		end := false
		for _, ev := range wr.Events {
			k := string(ev.Kv.Key)
			if ev.Type == mvccpb.DELETE {
				delete(copyOf, k)
			} else {
				copyOf[k] = string(ev.Kv.Value)
			}
			end = end || k == src+"zzzz-end"
		}
		if end {
			break
		}
	}
	if err := <-done; err != nil {
		return "", err
	}
	g, err := cli.Get(ctxT(5*time.Second), src, clientv3.WithPrefix())
	if err != nil {
		return "", err
	}
	if len(g.Kvs) != len(copyOf) {
		return "", fmt.Errorf("copy holds %d keys, source %d", len(copyOf),
			len(g.Kvs))
	}
	for _, kv := range g.Kvs {
		if copyOf[string(kv.Key)] != string(kv.Value) {
			return "", fmt.Errorf("%s: copy %q, source %q", kv.Key,
				copyOf[string(kv.Key)], kv.Value)
		}
	}
	return fmt.Sprintf("base %d keys, then 201 updates: copy equals source"+
		" (%d keys)", based, len(g.Kvs)), nil
}

func checkNamespace() (string, error) {
	cli := client()
	defer cli.Close()
	kv := namespace.NewKV(cli.KV, "/goclient/ns/")
	w := namespace.NewWatcher(cli.Watcher, "/goclient/ns/")
	defer w.Close()
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	wch := w.Watch(wctx, "a", clientv3.WithPrefix())
	for _, k := range []string{"a1", "a2", "b1"} {
		if _, err := kv.Put(ctxT(5*time.Second), k, k); err != nil {
			return "", err
		}
	}
	raw, err := cli.Get(ctxT(5*time.Second), "/goclient/ns/",
		clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return "", err
	}
	var rawKeys []string
	for _, k := range raw.Kvs {
		rawKeys = append(rawKeys, string(k.Key))
	}
	sort.Strings(rawKeys)
	if strings.Join(rawKeys, ",") != "/goclient/ns/a1,/goclient/ns/a2,"+
		"/goclient/ns/b1" {
		return "", fmt.Errorf("keys on the server: %v", rawKeys)
	}
	g, err := kv.Get(ctxT(5*time.Second), "a", clientv3.WithPrefix())
	if err != nil || len(g.Kvs) != 2 || string(g.Kvs[0].Key) != "a1" {
		return "", fmt.Errorf("namespaced get: %v, %v", g, err)
	}
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case wr := <-wch:
			for _, ev := range wr.Events {
				got = append(got, string(ev.Kv.Key))
			}
		case <-timeout:
			return "", fmt.Errorf("namespaced watch saw only %v", got)
		}
	}
	if strings.Join(got, ",") != "a1,a2" {
		return "", fmt.Errorf("namespaced watch saw %v", got)
	}
	return "prefix on the server, not in answers or events", nil
}

// checkKube runs the storage patterns of Kubernetes' apiserver (its etcd3
// store and cacher): creates as txns on mod_revision == 0, updates as
// compare-and-swap loops on mod_revision, deletes with a precondition,
// paginated lists at one revision (limit + continue key), an informer
// (list, then a watch from the list's revision + 1 with prev_kv, progress
// notify and created notify) keeping a cache, consistent reads from that
// cache (the current revision from a limit-1 read, then RequestProgress
// until the cache has it), the compactor's txn on compact_rev_key then
// Compact, and a reflector whose watch was compacted relisting.  Checked:
// events in revision order, every prev_kv equal to the cache's value, no
// progress revision above an undelivered event, each consistent read
// served within 5 s, the cache equal to a list at its revision, a
// compacted watch canceled with its compact revision.
func checkKube() (string, error) {
	const objects, writers, updates = 100, 4, 60
	pfx := "/registry/pods/default/"
	end := clientv3.GetPrefixRangeEnd(pfx)
	cli := client()
	defer cli.Close()
	ctx := func() context.Context { return ctxT(10 * time.Second) }
	var fe firstErr
	again := func(f func() error) error { return fe.again(100, f) }
	create := func(c *clientv3.Client, name, val string) (bool, error) {
		k := pfx + name
		t, err := c.Txn(ctx()).If(clientv3.Compare(
			clientv3.ModRevision(k), "=", 0)).Then(
			clientv3.OpPut(k, val)).Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return false, err
		}
		return t.Succeeded, nil
	}
	list := func(rev int64) (map[string]string, int64, error) {
		out := map[string]string{}
		key := pfx
		for {
			opts := []clientv3.OpOption{clientv3.WithRange(end),
				clientv3.WithLimit(17)}
			if rev != 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			g, err := cli.Get(ctx(), key, opts...)
			if err != nil {
				return nil, 0, err
			}
			if rev == 0 {
				rev = g.Header.Revision
			}
			for _, kv := range g.Kvs {
				out[string(kv.Key)] = string(kv.Value)
			}
			if !g.More {
				return out, rev, nil
			}
			key = string(g.Kvs[len(g.Kvs)-1].Key) + "\x00"
		}
	}
	if err := again(func() error {
		_, err := cli.Delete(ctx(), pfx, clientv3.WithRange(end))
		return err
	}); err != nil {
		return "", err
	}
	for i := 0; i < objects; i++ {
		tries := 0
		if err := again(func() error {
			ok, err := create(cli, fmt.Sprintf("pod-%03d", i), "0")
			tries++
			if err == nil && !ok && tries == 1 {
				err = fmt.Errorf("create pod-%03d refused", i)
				tries = -1000 // not to be retried
			}
			return err
		}); err != nil || tries < 0 {
			return "", fmt.Errorf("create: %v", err)
		}
	}
	var ok bool
	if err := again(func() (err error) {
		ok, err = create(cli, "pod-000", "x")
		return err
	}); err != nil || ok {
		return "", fmt.Errorf("a second create of pod-000 passed: %v", err)
	}
	var cache map[string]string
	var listRev int64
	if err := again(func() (err error) {
		cache, listRev, err = list(0)
		return err
	}); err != nil {
		return "", err
	}
	if len(cache) != objects {
		return "", fmt.Errorf("list: %d objects", len(cache))
	}

	// The informer.  inform feeds the cache from one watch; false when the
	// watch ended for good, true when its start revision was compacted.
	var inform func(wch clientv3.WatchChan) bool
	var mu sync.Mutex
	var cacheRev int64 = listRev
	progress := 0
	icli := client()
	defer icli.Close()
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	// applied: the events of the newest revision the cache took (appliedRev),
	// "TYPE:value" by key; progressed: a progress notification came after
	// them.
	var appliedRev int64
	applied := map[string]string{}
	progressed := false
	relists, resumeDups := 0, 0
	inform = func(wch clientv3.WatchChan) bool {
		created := false
		for wr := range wch {
			if err := wr.Err(); err != nil {
				if faults && wr.CompactRevision != 0 {
					return true
				}
				fe.set("informer watch: %v", err)
				return false
			}
			mu.Lock()
			if wr.Created {
				created = true
			} else if !created {
				fe.set("informer: a response before the created notice")
			}
			if wr.IsProgressNotify() {
				progress++
				if wr.Header.Revision < cacheRev {
					fe.set("progress at %d after events up to %d",
						wr.Header.Revision, cacheRev)
				}
				cacheRev = wr.Header.Revision
				progressed = true
			}
			for _, ev := range wr.Events {
				k := string(ev.Kv.Key)
				sig := ev.Type.String() + ":" + string(ev.Kv.Value)
				if ev.Kv.ModRevision <= cacheRev {
					// The Go client 3.4.23 resumes a broken stream at the
					// last progress revision itself, not the one after it
					// (fixed by etcd #15248, after 3.4.23): after a
					// member was killed it gets the events of that
					// revision again.  Only with -faults, only right
					// after a progress at the revision of the last
					// events, and only those same events.
					if faults && progressed &&
						ev.Kv.ModRevision == appliedRev &&
						applied[k] == sig {
						resumeDups++
						continue
					}
					fe.set("event %s at %d after the cache reached %d", k,
						ev.Kv.ModRevision, cacheRev)
				}
				if ev.Kv.ModRevision != appliedRev {
					appliedRev = ev.Kv.ModRevision
					applied = map[string]string{}
				}
				applied[k] = sig
				progressed = false
				cacheRev = ev.Kv.ModRevision
				old, had := cache[k]
				if had != (ev.PrevKv != nil) ||
					(had && string(ev.PrevKv.Value) != old) {
					fe.set("%s at %d: prev_kv %v, cache %q (%v)", k,
						ev.Kv.ModRevision, ev.PrevKv, old, had)
				}
				if ev.Type == mvccpb.DELETE {
					delete(cache, k)
				} else {
					if ev.IsCreate() == had {
						fe.set("%s at %d: IsCreate %v with the cache "+
							"holding it %v", k, ev.Kv.ModRevision,
							ev.IsCreate(), had)
					}
					cache[k] = string(ev.Kv.Value)
				}
			}
			mu.Unlock()
		}
		return false
	}
	informerDone := make(chan struct{})
	go func() {
		defer close(informerDone)
		for wctx.Err() == nil {
			mu.Lock()
			from := cacheRev + 1
			mu.Unlock()
			wch := icli.Watch(wctx, pfx, clientv3.WithRange(end),
				clientv3.WithRev(from), clientv3.WithPrevKV(),
				clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
			if !inform(wch) {
				return
			}
			// The watch's start was compacted (a reconnection after a
			// member was killed came too late): relist, as a reflector.
			fresh, rev, err := list(0)
			if err != nil {
				fe.set("informer relist: %v", err)
				return
			}
			mu.Lock()
			cache, cacheRev = fresh, rev
			appliedRev, applied, progressed = 0, map[string]string{}, false
			relists++
			mu.Unlock()
		}
	}()

	// Writers: compare-and-swap updates, deletes with a precondition,
	// re-creates.
	var conflicts, deletes, recreates int64
	// compactions is counted by the compactor below and read by the
	// writers: they go on until it compacted once (a minute at most), so
	// that a run whose members are killed meanwhile still compacts.
	var compactions int64
	began := time.Now()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := client()
			defer c.Close()
			r := rand.New(rand.NewSource(int64(w) + 100))
			// At least 1.5 s of writes, and until the compactor compacted.
			for u := 0; (u < updates || time.Since(began) < 1500*
				time.Millisecond || atomic.LoadInt64(&compactions) == 0 &&
				time.Since(began) < time.Minute) && fe.get() == nil; u++ {
				k := pfx + fmt.Sprintf("pod-%03d", r.Intn(objects))
				for {
					g, err := c.Get(ctx(), k)
					if err != nil {
						if fe.retry("writer get: %v", err) {
							continue
						}
						return
					}
					if len(g.Kvs) == 0 { // deleted: create it again
						ok, err := create(c, k[len(pfx):], "0")
						if err != nil {
							if fe.retry("writer create: %v", err) {
								continue
							}
							return
						}
						if ok {
							atomic.AddInt64(&recreates, 1)
							break
						}
						atomic.AddInt64(&conflicts, 1)
						continue
					}
					cur := g.Kvs[0]
					cmp := clientv3.Compare(clientv3.ModRevision(k), "=",
						cur.ModRevision)
					var op clientv3.Op
					if r.Intn(10) == 0 {
						op = clientv3.OpDelete(k)
					} else {
						n, _ := strconv.Atoi(string(cur.Value))
						op = clientv3.OpPut(k, strconv.Itoa(n+1))
					}
					t, err := c.Txn(ctx()).If(cmp).Then(op).Else(
						clientv3.OpGet(k)).Commit()
					if err != nil { // done or not: read again
						if fe.retry("writer txn: %v", err) {
							continue
						}
						return
					}
					if t.Succeeded {
						if op.IsDelete() {
							atomic.AddInt64(&deletes, 1)
						}
						break
					}
					atomic.AddInt64(&conflicts, 1)
				}
			}
		}(w)
	}

	// The compactor (apiserver's: a txn on compact_rev_key's version, then
	// Compact of the revision seen one interval before).
	compDone := make(chan struct{})
	go func() {
		defer close(compDone)
		var version, prev int64
		for {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			t, err := cli.Txn(ctx()).If(clientv3.Compare(
				clientv3.Version("compact_rev_key"), "=", version)).Then(
				clientv3.OpPut("compact_rev_key", "x")).Else(
				clientv3.OpGet("compact_rev_key")).Commit()
			if err != nil {
				if fe.retry("compactor txn: %v", err) {
					continue
				}
				return
			}
			if !t.Succeeded {
				version = t.Responses[0].GetResponseRange().Kvs[0].Version
				continue
			}
			version++
			if prev != 0 {
				if _, err := cli.Compact(ctx(), prev); err != nil &&
					!fe.retry("compact %d: %v", prev, err) {
					return
				}
				atomic.AddInt64(&compactions, 1)
			}
			prev = t.Header.Revision
		}
	}()

	// Consistent reads from the cache.
	var waits []time.Duration
	readBound := 5 * time.Second
	if faults { // a killed member's watch is resumed elsewhere first
		readBound = 20 * time.Second
	}
	reads := func() error {
		g, err := cli.Get(ctx(), pfx, clientv3.WithRange(end),
			clientv3.WithLimit(1))
		if err != nil {
			return err
		}
		want := g.Header.Revision
		t0 := time.Now()
		if err := icli.RequestProgress(ctx()); err != nil {
			return err
		}
		for {
			mu.Lock()
			have := cacheRev
			mu.Unlock()
			if have >= want {
				break
			}
			if time.Since(t0) > readBound {
				return fmt.Errorf("the cache stayed at %d, not %d, %v"+
					" after RequestProgress", have, want, readBound)
			}
			time.Sleep(time.Millisecond)
		}
		waits = append(waits, time.Since(t0))
		return nil
	}
	readsDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				readsDone <- nil
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err := reads(); err != nil && !fe.retry("%v", err) {
				readsDone <- fe.get()
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-compDone
	if err := <-readsDone; err != nil {
		return "", err
	}
	if err := fe.get(); err != nil {
		return "", err
	}
	// Writes over: one more consistent read, then the cache against a list
	// at its revision.
	if err := again(reads); err != nil {
		return "", err
	}
	mu.Lock()
	at := cacheRev
	snapshot := make(map[string]string, len(cache))
	for k, v := range cache {
		snapshot[k] = v
	}
	mu.Unlock()
	var fresh map[string]string
	if err := again(func() (err error) {
		fresh, _, err = list(at)
		return err
	}); err != nil {
		return "", fmt.Errorf("list at the cache's revision %d: %v", at, err)
	}
	if len(fresh) != len(snapshot) {
		return "", fmt.Errorf("cache %d objects, list %d at %d",
			len(snapshot), len(fresh), at)
	}
	for k, v := range fresh {
		if snapshot[k] != v {
			return "", fmt.Errorf("%s: cache %q, list %q at %d", k,
				snapshot[k], v, at)
		}
	}
	if atomic.LoadInt64(&compactions) == 0 {
		return "", errors.New("the compactor never compacted")
	}
	if faults {
		stopWatch()
		<-informerDone
		if err := fe.get(); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d compactions, %d consistent reads, %d"+
			" relists, %d events repeated by the client's resume, %d"+
			" errors retried; the cache equals a list at %d", compactions,
			len(waits), relists, resumeDups, fe.retried, at), nil
	}

	// A reflector whose watch start was compacted: canceled with the
	// compact revision, then a relist and a watch from there.
	rcli := client()
	defer rcli.Close()
	rctx, rstop := context.WithCancel(context.Background())
	defer rstop()
	old := rcli.Watch(rctx, pfx, clientv3.WithRange(end),
		clientv3.WithRev(listRev+1))
	var compactRev int64
	select {
	case wr, ok := <-old:
		if !ok || wr.CompactRevision == 0 || !wr.Canceled ||
			wr.Err() != rpctypes.ErrCompacted {
			return "", fmt.Errorf("a watch from compacted revision %d: %+v",
				listRev+1, wr)
		}
		compactRev = wr.CompactRevision
	case <-time.After(10 * time.Second):
		return "", errors.New("no answer to a watch from a compacted" +
			" revision")
	}
	relisted, rrev, err := list(0)
	if err != nil || len(relisted) != len(fresh) {
		return "", fmt.Errorf("relist: %d objects, %v", len(relisted), err)
	}
	rw := rcli.Watch(rctx, pfx, clientv3.WithRange(end),
		clientv3.WithRev(rrev+1))
	if _, err := cli.Put(ctx(), pfx+"pod-new", "n"); err != nil {
		return "", err
	}
	select {
	case wr := <-rw:
		if len(wr.Events) != 1 || string(wr.Events[0].Kv.Key) !=
			pfx+"pod-new" {
			return "", fmt.Errorf("the relisted watch got %+v", wr)
		}
	case <-time.After(10 * time.Second):
		return "", errors.New("the relisted watch got nothing")
	}
	stopWatch()
	<-informerDone
	if err := fe.get(); err != nil {
		return "", err
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	return fmt.Sprintf("%d writers x >= %d updates (%d conflicts, %d deletes,"+
		" %d re-creates), %d compactions (relist after compacted %d), %d"+
		" consistent reads from the cache: wait p50 %v max %v, %d progress"+
		" notifies", writers, updates, conflicts, deletes, recreates,
		compactions, compactRev, len(waits), waits[len(waits)/2],
		waits[len(waits)-1], progress), nil
}

func main() {
	eps := flag.String("endpoints", "127.0.0.1:2379", "comma-separated")
	flag.BoolVar(&faults, "faults", false, "members are killed meanwhile")
	flag.Parse()
	endpoints = strings.Split(*eps, ",")
	checks := map[string]func() (string, error){
		"mutex": checkMutex, "election": checkElection, "stm": checkSTM,
		"leasing": checkLeasing, "mirror": checkMirror,
		"namespace": checkNamespace, "kube": checkKube,
	}
	names := flag.Args()
	if len(names) == 0 {
		names = []string{"mutex", "election", "stm", "leasing", "mirror",
			"namespace", "kube"}
	}
	failed := false
	for _, n := range names {
		f, ok := checks[n]
		if !ok {
			fmt.Printf("FAIL %s unknown check\n", n)
			failed = true
			continue
		}
		t0 := time.Now()
		details, err := f()
		if err != nil {
			fmt.Printf("FAIL %s %v\n", n, err)
			failed = true
		} else {
			fmt.Printf("ok %s %s (%.1f s)\n", n, details,
				time.Since(t0).Seconds())
		}
	}
	if failed {
		os.Exit(1)
	}
}
