package distlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// A queuedRequest is one acquisition made by a worker of queuedRounds. Its
// instants are measured from the start of the rounds, on the monotonic
// clock.
type queuedRequest struct {
	worker  int
	what    string // "read", "write", "3 permits", "campaign"
	write   bool   // an RWMutex's write side
	permits int    // a Semaphore's permits asked for
	// send: before the call; ack: when its place in the queue was
	// acknowledged (EventWaiting), or acq if it never queued; acq: when the
	// call returned; rel: before its Unlock was sent.
	send, ack, acq, rel time.Duration
	waited              bool // it was queued
	token               uint64
}

func (r *queuedRequest) String() string {
	queued := "not queued"
	if r.waited {
		queued = fmt.Sprintf("queued %v", r.ack.Round(time.Microsecond))
	}
	return fmt.Sprintf("worker %d's %s (sent %v, %s, acquired %v, released %v, token %d)",
		r.worker, r.what, r.send.Round(time.Microsecond), queued,
		r.acq.Round(time.Microsecond), r.rel.Round(time.Microsecond), r.token)
}

// misorders reports the pairs of a test served out of arrival order: the
// first few in full, then how many there were.
type misorders struct {
	t *testing.T
	n int
}

func (m *misorders) add(format string, args ...any) {
	m.t.Helper()
	if m.n++; m.n <= 3 {
		m.t.Errorf(format, args...)
	}
}

func (m *misorders) report(ordered int) {
	m.t.Helper()
	if m.n > 0 {
		m.t.Errorf("%d of %d ordered pairs served out of arrival order", m.n, ordered)
	}
}

// queuedRounds runs workers goroutines, each with a Client of its own on
// srv (its own go-redis client and engine: no local queue or wake-up is
// shared, so the order among them is Redis's), each making rounds
// acquisitions with acquire, holding each about a millisecond and
// releasing it. It returns every acquisition.
func queuedRounds(t *testing.T, srv *redistest.Server, workers, rounds int,
	acquire func(ctx context.Context, c *distlock.Client, r *queuedRequest) (*distlock.Lease, error)) []queuedRequest {
	t.Helper()
	ctx := testCtx(t)
	start := time.Now()
	var mu sync.Mutex
	var all []queuedRequest
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		var ack atomic.Int64 // when the current call was queued, 0 if it was not
		c, _ := newClient(t, srv, distlock.WithEventHandler(func(e distlock.Event) {
			if e.Kind == distlock.EventWaiting {
				ack.Store(int64(time.Since(start)))
			}
		}))
		wg.Go(func() {
			for i := 0; i < rounds; i++ {
				r := queuedRequest{worker: w}
				ack.Store(0)
				r.send = time.Since(start)
				l, err := acquire(ctx, c, &r)
				if err != nil {
					t.Error(err)
					return
				}
				r.acq = time.Since(start)
				r.ack = r.acq
				if a := ack.Load(); a != 0 {
					r.ack, r.waited = time.Duration(a), true
				}
				r.token = l.Token()
				time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Microsecond) // the work
				r.rel = time.Since(start)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return all
}

// orderedPairs calls check for every pair of acquisitions by different
// workers where a's place in the queue was acknowledged (or a held the
// lock) before b was sent: a arrived first. queued says that b was sent
// while a still waited, and was queued too: both waited in the queue
// together, and the queue decided between them. It returns how many pairs
// there were.
func orderedPairs(all []queuedRequest, check func(a, b *queuedRequest, queued bool)) int {
	n := 0
	for i := range all {
		for j := range all {
			a, b := &all[i], &all[j]
			if a.worker == b.worker || a.ack >= b.send {
				continue
			}
			n++
			check(a, b, a.acq > b.send && b.waited)
		}
	}
	return n
}

// Readers and writers of an RWMutex in six Clients of their own, a third
// of the requests writes, are served in the order they reached Redis's
// queue. For every pair where one request's place was acknowledged before
// the other request was sent, the earlier one is granted first: its
// fencing token, minted when Redis grants, is the lower, whatever the two
// sides; so a reader that arrives while a writer waits never gets in
// before it. If either of the two writes, the later one's hold also begins
// after the earlier one's ended. Readers next to each other in the queue
// are let in by one release (doc: "every reader at the head of the queue
// up to the next writer"): for two readers, order means the grant alone,
// the release granting them in queue order, one token each; their holds
// may overlap and their RLock calls may return in either order. The test
// fails unless each of the four combinations of sides waited in the queue
// together, and queued readers shared the lock.
func TestRWMutexFIFOAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	const workers, rounds = 6, 50
	all := queuedRounds(t, srv, workers, rounds, func(ctx context.Context, c *distlock.Client, r *queuedRequest) (*distlock.Lease, error) {
		m := c.RWMutex("rw-fifo", distlock.WithTTL(5*time.Second))
		if r.write = rand.IntN(3) == 0; r.write {
			r.what = "write"
			return m.Lock(ctx)
		}
		r.what = "read"
		return m.RLock(ctx)
	})
	queued := map[string]int{} // queued pairs by sides, "read-write": a read, then a write
	shared := 0                // queued pairs of readers that held the lock together
	bad := misorders{t: t}
	ordered := orderedPairs(all, func(a, b *queuedRequest, q bool) {
		if q {
			queued[a.what+"-"+b.what]++
			if !a.write && !b.write && a.acq < b.rel && b.acq < a.rel {
				shared++
			}
		}
		switch {
		case a.token >= b.token:
			bad.add("granted out of arrival order: %v was queued (or held) before %v was sent, and got the higher token", a, b)
		case (a.write || b.write) && b.acq <= a.rel:
			bad.add("%v was queued (or held) before %v was sent, which acquired before the first released", a, b)
		}
	})
	bad.report(ordered)
	for _, k := range []string{"write-write", "write-read", "read-write", "read-read"} {
		if queued[k] < 5 {
			t.Errorf("only %d %s pairs (of %d ordered pairs) waited in the queue together: the test did not make them queue", queued[k], k, ordered)
		}
	}
	if shared == 0 {
		t.Errorf("no two queued readers held the lock together: the test did not exercise shared grants")
	}
	t.Logf("%d acquisitions, %d ordered pairs across clients, queued together: %v, %d queued reader pairs held together",
		len(all), ordered, queued, shared)
}

// Acquisitions of 1 to 4 of a semaphore's 4 permits, by six Clients of
// their own, are admitted in the order they reached Redis's queue: for
// every pair where one request's place was acknowledged before the other
// request was sent, the earlier one is admitted first (its fencing token,
// minted when Redis admits, is the lower), even when the later one asks
// for fewer permits: a release lets in the places at the head of the queue
// whose permits fit, in order, and stops at the first that does not fit.
// Places next to each other may be let in by one release and return in
// either order: the admission order alone is checked. The test fails
// unless many later requests for fewer permits waited behind an earlier,
// larger one.
func TestSemaphoreFIFOAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	const workers, rounds, capacity = 6, 50, 4
	all := queuedRounds(t, srv, workers, rounds, func(ctx context.Context, c *distlock.Client, r *queuedRequest) (*distlock.Lease, error) {
		r.permits = 1 + rand.IntN(capacity)
		r.what = fmt.Sprintf("%d permits", r.permits)
		return c.Semaphore("sem-fifo", capacity, distlock.WithTTL(5*time.Second)).Acquire(ctx, r.permits)
	})
	queued, smallBehindLarge := 0, 0
	bad := misorders{t: t}
	ordered := orderedPairs(all, func(a, b *queuedRequest, q bool) {
		if q {
			queued++
			if b.permits < a.permits {
				smallBehindLarge++
			}
		}
		if a.token >= b.token {
			bad.add("admitted out of arrival order: %v was queued (or held) before %v was sent, and got the higher token", a, b)
		}
	})
	bad.report(ordered)
	if queued < rounds || smallBehindLarge < rounds/2 {
		t.Errorf("only %d pairs (of %d ordered) waited in the queue together, %d of them a smaller request behind a larger one: the test did not make them queue",
			queued, ordered, smallBehindLarge)
	}
	t.Logf("%d acquisitions, %d ordered pairs across clients, %d of them queued together, %d of those a smaller request behind a larger one",
		len(all), ordered, queued, smallBehindLarge)
}

// Candidates in four Clients of their own campaign again and again, each
// leading about a millisecond and resigning: they are elected in the order
// their campaigns reached Redis's queue. For every pair where one
// candidate's place was acknowledged before the other campaigned, the
// earlier one is elected first (the lower term) and the later one's term
// begins after the earlier one resigned. The test fails unless many pairs
// of candidates waited in the queue together.
func TestElectionFIFOAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	const workers, rounds = 4, 50
	all := queuedRounds(t, srv, workers, rounds, func(ctx context.Context, c *distlock.Client, r *queuedRequest) (*distlock.Lease, error) {
		r.what = "campaign"
		return c.Election("elect-fifo", distlock.WithTTL(5*time.Second)).Campaign(ctx, fmt.Sprint(r.worker))
	})
	queued := 0
	bad := misorders{t: t}
	ordered := orderedPairs(all, func(a, b *queuedRequest, q bool) {
		if q {
			queued++
		}
		if a.token >= b.token || b.acq <= a.rel {
			bad.add("elected out of arrival order: %v was queued (or led) before %v was sent, and was not elected and resigned before it", a, b)
		}
	})
	bad.report(ordered)
	if queued < rounds {
		t.Errorf("only %d pairs (of %d ordered) waited in the queue together: the test did not make candidates queue", queued, ordered)
	}
	t.Logf("%d terms, %d ordered pairs across clients, %d of them queued together", len(all), ordered, queued)
}
