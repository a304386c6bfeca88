package distlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// A guard records, in Redis, who is inside the critical section of a
// read-write lock, across processes: entering as a reader counts the
// readers and reports a writer inside; entering as a writer reports anyone
// else inside. Each step is one script, so the checks are exact: if two
// holders overlap, whichever entered second sees the first.
var (
	enterRead = redis.NewScript(`
local r = redis.call('INCR', KEYS[1])
local w = tonumber(redis.call('GET', KEYS[2]) or '0')
if w > 0 then redis.call('INCR', KEYS[3]) end
return r`)
	enterWrite = redis.NewScript(`
local w = redis.call('INCR', KEYS[2])
local r = tonumber(redis.call('GET', KEYS[1]) or '0')
if w > 1 or r > 0 then redis.call('INCR', KEYS[3]) end
return w`)
)

// guardKeys are the guard's counters: readers inside, writers inside,
// overlaps seen.
func guardKeys(name string) []string {
	return []string{"guard:" + name + ":r", "guard:" + name + ":w", "guard:" + name + ":overlaps"}
}

// guard enters name's guard as a reader or a writer and returns the exit,
// and, for a reader, how many readers were inside with it.
func guard(ctx context.Context, rdb *redis.Client, name string, write bool) (readers int, exit func() error, err error) {
	keys := guardKeys(name)
	key := keys[0]
	if write {
		key = keys[1]
		_, err = enterWrite.Run(ctx, rdb, keys).Result()
	} else {
		var n int64
		n, err = enterRead.Run(ctx, rdb, keys).Int64()
		readers = int(n)
	}
	return readers, func() error { return rdb.Decr(ctx, key).Err() }, err
}

// rwReaders is the body of an "rw-readers" helper process: goroutines take
// the read side of name over and over, inside the guard for 2-4 ms, until
// stdin closes. Each read is printed as "read SEND ACQ READERS" (UnixNano times;
// READERS: readers inside at its entry); then "done".
func rwReaders(ctx context.Context, rdb *redis.Client, name string, goroutines int) int {
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer c.Close()
	m := c.RWMutex(name, distlock.WithTTL(5*time.Second))
	var stop atomic.Bool
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
		}
		stop.Store(true)
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed := atomic.Bool{}
	for g := 0; g < goroutines; g++ {
		wg.Go(func() {
			for !stop.Load() {
				send := time.Now().UnixNano()
				l, err := m.RLock(ctx)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					failed.Store(true)
					return
				}
				acq := time.Now().UnixNano()
				readers, exit, err := guard(ctx, rdb, name, false)
				if err == nil {
					time.Sleep(time.Duration(2+rand.IntN(3)) * time.Millisecond)
					err = exit()
				}
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					failed.Store(true)
					return
				}
				mu.Lock()
				fmt.Printf("read %d %d %d\n", send, acq, readers)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println("done")
	if failed.Load() {
		return 1
	}
	return 0
}

// rwHold is the body of an "rw-hold" helper process: it takes side ("read"
// or "write") of name with a lease of ttl, prints "acquired TOKEN" and
// holds it until killed.
func rwHold(ctx context.Context, c *distlock.Client, name, side string, ttl time.Duration, say func(string, ...any)) int {
	m := c.RWMutex(name, distlock.WithTTL(ttl))
	lock := m.RLock
	if side == "write" {
		lock = m.Lock
	}
	l, err := lock(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	say("acquired %d", l.Token())
	select {}
}

// Readers in three processes share the lock (more than one reads at once),
// while a writer in a fourth takes it now and then: no writer ever
// overlaps a reader or another writer, by the guard's exact count.
func TestRWReadersShareWriterExcludes(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx := testCtx(t)
	var readers []*helper
	for p := 0; p < 3; p++ {
		readers = append(readers, startHelper(t, "rw-readers", srv.URL(), "share", "2"))
	}
	m := c.RWMutex("share", distlock.WithTTL(5*time.Second))
	for i := 0; i < 20; i++ {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, exit, err := guard(ctx, rdb, "share", true)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if err := exit(); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	most, reads := 0, 0
	for _, h := range readers {
		h.stdin.Close()
		for line := range h.lines {
			f := strings.Fields(line)
			if f[0] == "read" {
				reads++
				var n int
				fmt.Sscan(f[3], &n)
				most = max(most, n)
			}
		}
		if err := h.wait(t); err != nil {
			t.Fatalf("reader process: %v", err)
		}
	}
	if n, _ := rdb.Get(ctx, guardKeys("share")[2]).Int(); n != 0 {
		t.Fatalf("%d overlaps of a writer with another holder", n)
	}
	if most < 2 {
		t.Fatalf("at most %d reader at once in %d reads: readers did not share", most, reads)
	}
	t.Logf("%d reads, up to %d readers at once, 20 writes, no overlap", reads, most)
}

// A writer that starts waiting while readers of three processes read
// continuously gets the lock, and no read that was asked for after the
// writer queued was granted before the writer; ten times over.
func TestRWWriterNotStarved(t *testing.T) {
	srv := redistest.Start(t)
	queuedAt := atomic.Int64{}
	c, _ := newClient(t, srv, distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			queuedAt.Store(time.Now().UnixNano())
		}
	}))
	ctx := testCtx(t)
	var readers []*helper
	for p := 0; p < 3; p++ {
		h := startHelper(t, "rw-readers", srv.URL(), "starve", "2")
		h.expect(t, "read") // reading continuously
		readers = append(readers, h)
	}
	type write struct{ queued, acquired int64 }
	var writes []write
	for i := 0; i < 10; i++ {
		queuedAt.Store(0)
		l, err := c.RWMutex("starve").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w := write{queuedAt.Load(), time.Now().UnixNano()}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if w.queued != 0 {
			writes = append(writes, w)
		}
	}
	if len(writes) == 0 {
		t.Fatal("the writer never queued: the readers did not keep the lock busy")
	}
	behind := 0
	for _, h := range readers {
		h.stdin.Close()
		for line := range h.lines {
			f := strings.Fields(line)
			if f[0] != "read" {
				continue
			}
			var send, acq int64
			fmt.Sscan(f[1], &send)
			fmt.Sscan(f[2], &acq)
			for _, w := range writes {
				if send <= w.queued {
					continue
				}
				if send < w.acquired {
					behind++
				}
				if acq < w.acquired {
					t.Errorf("a read asked for at %d, after a writer queued at %d, was granted at %d, before the writer at %d", send, w.queued, acq, w.acquired)
				}
			}
		}
		if err := h.wait(t); err != nil {
			t.Fatalf("reader process: %v", err)
		}
	}
	if behind == 0 {
		t.Fatal("no read was asked for while a writer waited: the test did not test anything")
	}
	t.Logf("%d writes queued behind readers; %d reads asked for meanwhile waited behind them", len(writes), behind)
}

// Downgrade: a writer that also takes the read side still reads when it
// unlocks its write lease, and a writer waiting in another process does
// not get in between; it gets the lock only when the read lease is
// unlocked too. An upgrade fails at once with ErrDeadlock.
func TestRWDowngradeNoGap(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.RWMutex("down")
	w, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.RLock(w.Context())
	if err != nil || r.Token() != w.Token() {
		t.Fatalf("downgrade: %v, %v", r, err)
	}
	other := startHelper(t, "rw-hold", srv.URL(), "down", "write", "30s")
	other.expect(t, "waiting")
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := m.Inspect(ctx)
	if err != nil || info.Mode != "read" || info.Writer != nil || len(info.Readers) != 1 || info.Readers[0].Token != w.Token() || info.QueuedWriters != 1 {
		t.Fatalf("after the write unlock: %+v, %v; want this owner reading, the other writer queued", info, err)
	}
	if r.Context().Err() != nil {
		t.Fatalf("the kept read lease ended: %v", context.Cause(r.Context()))
	}
	// Upgrade: the read lease's context asks for the write side.
	start := time.Now()
	if _, err := m.Lock(r.Context()); !errors.Is(err, distlock.ErrDeadlock) || !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("upgrade: %v, want ErrDeadlock", err)
	}
	rr, err := c.RWMutex("up").RLock(ctx) // a reader that never wrote
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RWMutex("up").Lock(rr.Context()); !errors.Is(err, distlock.ErrDeadlock) {
		t.Fatalf("upgrade of a reader: %v, want ErrDeadlock", err)
	}
	t.Logf("upgrades refused in %v", time.Since(start))
	select {
	case line := <-other.lines:
		t.Fatalf("the other writer printed %q while this owner reads", line)
	default:
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var tok uint64
	fmt.Sscan(other.expect(t, "acquired")[1], &tok)
	if tok <= w.Token() {
		t.Fatalf("the other writer's token %d, not above %d", tok, w.Token())
	}
}

// A reader killed while it holds the lock (SIGKILL) loses its hold when
// its own lease ends, while another reader keeps reading: the waiting
// writer gets the lock only when the live reader unlocks.
func TestRWKilledReaderExpiresAlone(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	writer, _ := newClient(t, srv)
	ctx := testCtx(t)
	dead := startHelper(t, "rw-hold", srv.URL(), "killed", "read", "1s")
	dead.expect(t, "acquired")
	m := c.RWMutex("killed", distlock.WithTTL(30*time.Second))
	live, err := m.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *distlock.Lease, 1)
	go func() {
		l, err := writer.RWMutex("killed").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, func() bool { info, _ := m.Inspect(ctx); return info.QueuedWriters == 1 })
	dead.signal(t, syscall.SIGKILL)
	waitFor(t, func() bool { info, _ := m.Inspect(ctx); return len(info.Readers) == 1 })
	info, _ := m.Inspect(ctx)
	if info.Readers[0].Token != live.Token() || info.QueuedWriters != 1 || live.Context().Err() != nil {
		t.Fatalf("after the killed reader's lease: %+v (live lease: %v)", info, context.Cause(live.Context()))
	}
	select {
	case <-got:
		t.Fatal("the writer got the lock while a reader reads")
	default:
	}
	if err := live.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil || w.Token() <= live.Token() {
		t.Fatalf("writer lease %v", w)
	}
	w.Unlock(ctx)
}

// waitFor polls cond (bounded) for a state that nothing signals: a lease
// that ran out in Redis.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 1000 {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Readers and writers whose contexts end at random moments while the lock
// changes hands: never a writer with anyone else, and nothing left in
// Redis but the fencing counter and abandonment marks (which expire).
func TestRWCancellation(t *testing.T) {
	srv := redistest.Start(t)
	c1, rdb := newClient(t, srv)
	c2, _ := newClient(t, srv)
	ctx := testCtx(t)
	var acquired, cancelled atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		c := c1
		if g%2 == 1 {
			c = c2
		}
		write := g%3 == 0
		wg.Go(func() {
			m := c.RWMutex("cancel", distlock.WithTTL(5*time.Second), distlock.WithQueueTimeout(time.Second))
			for i := 0; i < 30; i++ {
				wctx, cancel := context.WithTimeout(ctx, patience())
				lock := m.RLock
				if write {
					lock = m.Lock
				}
				l, err := lock(wctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("lock: %v", err)
						return
					}
					cancelled.Add(1)
					continue
				}
				acquired.Add(1)
				_, exit, err := guard(ctx, rdb, "cancel", write)
				if err == nil {
					time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
					err = exit()
				}
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if acquired.Load() == 0 || cancelled.Load() == 0 {
		t.Fatalf("%d acquired, %d cancelled: the test must do both", acquired.Load(), cancelled.Load())
	}
	if n, _ := rdb.Get(ctx, guardKeys("cancel")[2]).Int(); n != 0 {
		t.Fatalf("%d overlaps", n)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	onlyExpiringKeys(t, rdb)
	t.Logf("%d acquired, %d cancelled", acquired.Load(), cancelled.Load())
}

// Re-entry on each side, and the errors of bad use.
func TestRWReentryAndMisuse(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.RWMutex("use")
	r, err := m.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m.RLock(r.Context())
	if err != nil || r2.Token() != r.Token() {
		t.Fatalf("read re-entry: %v, %v", r2, err)
	}
	other, err := m.RLock(ctx) // another owner reads too
	if err != nil || other.Token() <= r.Token() {
		t.Fatalf("second reader: %v, %v", other, err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock while read: %v", err)
	}
	for what, try := range map[string]func() error{
		"Mutex.Lock":           func() error { _, err := c.Mutex("use").Lock(ctx); return err },
		"FairMutex.TryLock":    func() error { _, err := c.FairMutex("use").TryLock(ctx); return err },
		"Mutex with a lease":   func() error { _, err := c.Mutex("use").Lock(r.Context()); return err },
		"FairMutex with lease": func() error { _, err := c.FairMutex("use").Lock(r.Context()); return err },
	} {
		if err := try(); !errors.Is(err, distlock.ErrWrongKind) || errors.Is(err, distlock.ErrBackend) {
			t.Errorf("%s on a read-write lock: %v, want ErrWrongKind", what, err)
		}
	}
	for _, l := range []*distlock.Lease{r2, r, other} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	w, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := m.Lock(w.Context())
	if err != nil || w2.Token() != w.Token() || w.Token() <= other.Token() {
		t.Fatalf("write re-entry: %v, %v (tokens %d, reader %d)", w2, err, w.Token(), other.Token())
	}
	if err := w.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	info, err := m.Inspect(ctx)
	if err != nil || info.Mode != "write" || info.Writer == nil || info.Writer.Holds != 2 || info.Writer.TTL < 50*time.Second {
		t.Fatalf("Inspect: %+v, %v", info, err)
	}
	if _, err := m.TryRLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryRLock while written: %v", err)
	}
	w2.Unlock(ctx)
	w.Unlock(ctx)
	if info, _ := m.Inspect(ctx); info.Mode != "" {
		t.Fatalf("after the unlocks: %+v", info)
	}
	if _, err := c.RWMutex("").Lock(ctx); !errors.Is(err, distlock.ErrInvalidName) {
		t.Fatalf("empty name: %v", err)
	}
}

// A reader and a writer of one Client waiting for the same lock share the
// watch of the Client's grants: when the reader gives up, the writer is
// still told of its grant at once (its refresh, ten seconds away with
// these timeouts, would come after its context ended).
func TestRWReaderAndWriterShareTheWatch(t *testing.T) {
	srv := redistest.Start(t)
	holder, _ := newClient(t, srv)
	ev := newEvents()
	c, _ := newClient(t, srv, distlock.WithEventHandler(ev.handle))
	ctx := testCtx(t)
	opts := []distlock.MutexOption{distlock.WithTTL(30 * time.Second), distlock.WithQueueTimeout(30 * time.Second)}
	h, err := holder.RWMutex("share-watch", opts...).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := c.RWMutex("share-watch", opts...)
	wrote := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := m.Lock(wctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		wrote <- err
	}()
	ev.await(distlock.EventWaiting, 1)
	rctx, cancel := context.WithCancel(ctx)
	read := make(chan error, 1)
	go func() { _, err := m.RLock(rctx); read <- err }()
	ev.await(distlock.EventWaiting, 2)
	cancel()
	if err := <-read; !errors.Is(err, context.Canceled) {
		t.Fatalf("reader: %v", err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("writer: %v (its grant was not pushed)", err)
	}
}

// Every Inspect tells the kind a name is in use as, and says nothing else
// of a lock of another kind.
func TestInspectKinds(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		lock func(context.Context) (*distlock.Lease, error)
		kind distlock.Kind
	}{
		{"k-mutex", c.Mutex("k-mutex").Lock, distlock.KindMutex},
		{"k-fair", c.FairMutex("k-fair").Lock, distlock.KindFairMutex},
		{"k-rw", c.RWMutex("k-rw").RLock, distlock.KindRWMutex},
	} {
		l, err := tc.lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mi, err1 := c.Mutex(tc.name).Inspect(ctx)
		ri, err2 := c.RWMutex(tc.name).Inspect(ctx)
		if err1 != nil || err2 != nil || mi.Kind != tc.kind || ri.Kind != tc.kind {
			t.Fatalf("%s: kinds %q and %q (%v, %v), want %q", tc.name, mi.Kind, ri.Kind, err1, err2, tc.kind)
		}
		if tc.kind == distlock.KindRWMutex && (mi.Locked || mi.Holds != 0) || tc.kind != distlock.KindRWMutex && (ri.Mode != "" || len(ri.Readers) != 0) {
			t.Fatalf("%s: another kind's state shown: %+v / %+v", tc.name, mi, ri)
		}
		l.Unlock(ctx)
		if mi, _ := c.Mutex(tc.name).Inspect(ctx); mi.Kind != distlock.KindFree {
			t.Fatalf("%s: kind %q once free", tc.name, mi.Kind)
		}
	}
}
