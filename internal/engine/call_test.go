package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// hangingAcquire is a store whose acquisitions never get a reply: each
// returns once its context ends, recording the owner and whether that was
// before the caller's call returned. interruptible says what it claims
// (store.Interruptible).
type hangingAcquire struct {
	*fakeBackend
	interruptible bool

	mu        sync.Mutex
	returned  bool     // an Acquire returned (its context ended)
	acquirers []string // owners of the acquisitions
	abandoned []string // owners abandoned
}

func (h *hangingAcquire) Interruptible() bool { return h.interruptible }

func (h *hangingAcquire) Acquire(ctx context.Context, r Request) (Grant, error) {
	h.mu.Lock()
	h.acquirers = append(h.acquirers, r.Owner)
	h.mu.Unlock()
	<-ctx.Done()
	h.mu.Lock()
	h.returned = true
	h.mu.Unlock()
	return Grant{}, ctx.Err()
}

func (h *hangingAcquire) Abandon(ctx context.Context, r Request) (bool, error) {
	h.mu.Lock()
	h.abandoned = append(h.abandoned, r.Owner)
	h.mu.Unlock()
	return false, nil
}

// A caller that gives up on an acquisition gets ErrNotAcquired with its
// context's cause, and the attempt's owner is abandoned before the call
// returns, whichever way the request is sent. To an Interruptible store
// it is sent under a context that ends with the caller's, so the request
// itself has returned by then; to another store it is left running, on a
// goroutine of the engine's, until its own limit (the lease).
func TestCallerGivesUpOnARequest(t *testing.T) {
	for _, interruptible := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			b := &hangingAcquire{fakeBackend: newFake(), interruptible: interruptible}
			e := New(b, nil, nil)
			cause := errors.New("the caller left")
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() {
				synctest.Wait() // the acquisition is blocked in the store
				cancel(cause)
			}()
			_, err := e.Acquire(ctx, Spec{Name: "x", Lease: time.Minute, Renew: true}, false)
			if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, cause) {
				t.Errorf("interruptible %v: Acquire: %v, want ErrNotAcquired and the cause", interruptible, err)
			}
			b.mu.Lock()
			returned, acquirers, abandoned := b.returned, b.acquirers, append([]string(nil), b.abandoned...)
			b.mu.Unlock()
			if returned != interruptible {
				t.Errorf("interruptible %v: the request had returned when the call did: %v", interruptible, returned)
			}
			if len(acquirers) != 1 || len(abandoned) == 0 || abandoned[0] != acquirers[0] {
				t.Errorf("interruptible %v: acquired by %v, abandoned %v before the call returned: want the acquirer abandoned",
					interruptible, acquirers, abandoned)
			}
			closed, stop := context.WithTimeout(context.Background(), 2*time.Minute)
			defer stop()
			if err := e.Close(closed); err != nil {
				t.Errorf("interruptible %v: Close: %v", interruptible, err)
			}
		})
	}
}

// instant is a store that answers every request at once, and says whether
// it is Interruptible.
type instant struct {
	*fakeBackend
	interruptible bool
}

func (i instant) Interruptible() bool { return i.interruptible }

// BenchmarkCall measures what the engine's sending of a request costs
// around a store that answers at once, for a caller whose context can
// end: an acquisition and a release of a free lock, the requests sent from
// the caller's goroutine (to an Interruptible store) or handed to a worker
// goroutine (to any other).
//
//	go test -run '^$' -bench Call -cpu 1,2 -count 5 ./internal/engine
func BenchmarkCall(b *testing.B) {
	for _, interruptible := range []bool{true, false} {
		name := "worker"
		if interruptible {
			name = "inline"
		}
		b.Run(name, func(b *testing.B) {
			e := New(instant{newFake(), interruptible}, nil, nil)
			defer e.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			s := Spec{Name: "x", Lease: time.Minute, Renew: true}
			b.ReportAllocs()
			for b.Loop() {
				l, err := e.Acquire(ctx, s, false)
				if err != nil || l == nil {
					b.Fatal(l, err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
