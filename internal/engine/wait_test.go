package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Item 4 of the hardening issue: a waiter whose context ends just as it is
// woken hands the wake-up on; the next waiter does not sleep while the lock
// is free. Both orders of the race (wake taken, then the context's end seen;
// or the other way round) are tried many times on the fake clock.
func TestCancelledWaiterHandsOnItsWakeUp(t *testing.T) {
	for round := 0; round < 50; round++ {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			e := New(f, nil, nil)
			defer e.Close(context.Background())
			const lease = time.Hour // a waiter that misses its wake-up sleeps this long
			f.holdFor("x", "other", lease)
			spec := Spec{Name: "x", Lease: lease, Renew: false}

			ctx1, cancel1 := context.WithCancel(context.Background())
			first := make(chan *Lease, 1)
			go func() {
				l, _ := e.Acquire(ctx1, spec, true)
				first <- l
			}()
			synctest.Wait() // the first waiter sleeps
			second := make(chan *Lease, 1)
			go func() {
				l, err := e.Acquire(context.Background(), spec, true)
				if err != nil {
					t.Error(err)
				}
				second <- l
			}()
			synctest.Wait() // the second waiter sleeps behind it

			start := time.Now()
			f.releaseAndNotify("x") // wakes the head: the first waiter
			cancel1()               // which gives up at the same moment
			if l := <-first; l != nil {
				// It took the lock before it saw its context end: then the
				// second waiter gets it when it is unlocked.
				l.Unlock(context.Background())
			}
			l := <-second
			if waited := time.Since(start); waited >= lease/2 {
				t.Fatalf("round %d: the second waiter got the free lock after %v: the wake-up was lost", round, waited)
			}
			l.Unlock(context.Background())
		})
	}
}

// Item 5: when the head waiter gives up, the next one takes over its duty
// to try when the holder's lease ends. A holder that crashed (its lease
// simply runs out, nothing is published) costs the next waiter at most the
// holder's remaining lease, not its own.
func TestNextWaiterSleepsTheHoldersLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		e := New(f, nil, nil)
		defer e.Close(context.Background())
		const holderLease = 2 * time.Second
		f.holdFor("x", "crashed", holderLease)
		start := time.Now()

		ctx1, cancel1 := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() {
			_, err := e.Acquire(ctx1, Spec{Name: "x", Lease: time.Minute}, true)
			first <- err
		}()
		synctest.Wait()
		second := make(chan *Lease, 1)
		go func() {
			l, err := e.Acquire(context.Background(), Spec{Name: "x", Lease: time.Hour}, true)
			if err != nil {
				t.Error(err)
			}
			second <- l
		}()
		synctest.Wait()
		time.Sleep(100 * time.Millisecond) // fake time: the head waits a while
		cancel1()
		<-first
		l := <-second
		if got := time.Since(start); got > holderLease+time.Millisecond {
			t.Fatalf("the next waiter acquired %v after the holder's lease began; its lease was %v: want by %v", got, holderLease, holderLease)
		}
		l.Unlock(context.Background())
	})
}

// Item 10: a waiter whose sight of the holder's lease has just run out
// (it found the dead holder's key with 0 ms left, and a few microseconds
// passed since) tries again within a millisecond. The remaining lease,
// gone slightly negative, used to be read as unknown and polled a second
// later: a lock whose holder died was handed over a second late, every
// other time.
func TestWaiterTriesAtOnceWhenTheHoldersLeaseHasRunOut(t *testing.T) {
	e := New(newFake(), nil, nil)
	defer e.Close(context.Background())
	q := &queue{}
	e.heldUntil(q, 0)
	time.Sleep(time.Millisecond) // the moment seen has passed
	if d := pollDelay(e.holderLeft(q, time.Minute)); d > time.Millisecond {
		t.Fatalf("a waiter whose holder's lease ran out sleeps %v before it tries again: want at most 1ms", d)
	}
	e.heldUntil(q, -1) // unknown: the waiter falls back to its own lease
	if d := pollDelay(e.holderLeft(q, time.Minute)); d != time.Minute {
		t.Fatalf("with the holder's lease unknown, the waiter sleeps %v: want its own lease, 1m0s", d)
	}
}
