package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock/store"
)

// fairFake is an in-memory queued-kind Backend for one lock, on synctest's
// fake clock: a holder with a lease, and places in arrival order that
// expire unless refreshed. The Redis scripts that do this for real are
// tested against redis-server in internal/redisbackend.
type fairFake struct {
	mu        sync.Mutex
	holder    string
	token     uint64
	gseq      uint64
	glease    time.Duration
	until     time.Time // the holder's lease end
	queue     []string
	places    map[string]*fakePlace
	abandoned map[string]bool
	wake      func(Notice)

	muteGrants bool          // grant without a notice (a lost message)
	holdGrants bool          // keep notices in held until deliverHeld
	held       []Notice      // notices held up
	hangLeases bool          // lease renewals never answer (refreshes do)
	stall      chan struct{} // when not nil, a refresh waits for it to close before it is applied
	stalled    chan struct{} // receives when a refresh starts waiting on stall
	renewals   []Request
	applied    map[string]map[uint64]time.Time // when each request of a place was applied
	leaseErr   error                           // lease renewals are applied, then reported with this error (not acknowledged)
	// gates: an Abandon of an owner with a gate waits for it to close
	// before it is applied (a clean-up slow to land).
	gates map[string]chan struct{}
}

type fakePlace struct {
	seq     uint64
	lease   time.Duration
	timeout time.Duration
	until   time.Time
}

func newFairFake() *fairFake {
	return &fairFake{places: map[string]*fakePlace{}, abandoned: map[string]bool{}, applied: map[string]map[uint64]time.Time{}}
}

// settle ends an expired lease and expired places. f.mu must be held.
func (f *fairFake) settle() {
	now := time.Now()
	if f.holder != "" && !now.Before(f.until) {
		f.holder = ""
	}
	f.queue = slices.DeleteFunc(f.queue, func(o string) bool {
		if !now.Before(f.places[o].until) {
			delete(f.places, o)
			return true
		}
		return false
	})
}

func (f *fairFake) take(owner string, gseq uint64, lease time.Duration) {
	f.holder, f.gseq, f.glease, f.until = owner, gseq, lease, time.Now().Add(lease)
	f.token++
}

// grantHead gives the free lock to the first place; f.mu must be held.
func (f *fairFake) grantHead() []Notice {
	if f.holder != "" || len(f.queue) == 0 {
		return nil
	}
	head := f.queue[0]
	p := f.places[head]
	f.queue = f.queue[1:]
	delete(f.places, head)
	f.take(head, p.seq, min(p.lease, p.timeout))
	n := Notice{Grantee: GranteeID(head), Token: f.token, Seq: f.gseq, Lease: f.glease}
	switch {
	case f.muteGrants:
		return nil
	case f.holdGrants:
		f.held = append(f.held, n)
		return nil
	}
	return []Notice{n}
}

func (f *fairFake) tell(ns []Notice) {
	f.mu.Lock()
	wake := f.wake
	f.mu.Unlock()
	for _, n := range ns {
		if wake != nil {
			wake(n)
		}
	}
}

func (f *fairFake) record(owner string, seq uint64) {
	if f.applied[owner] == nil {
		f.applied[owner] = map[uint64]time.Time{}
	}
	f.applied[owner][seq] = time.Now()
}

func (f *fairFake) Acquire(ctx context.Context, r Request) (Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settle()
	if f.holder == r.Owner {
		return Grant{Acquired: true, Token: f.token, Holds: 1, Seq: f.gseq, Lease: f.glease}, nil
	}
	if r.Reenter || f.abandoned[r.Owner] {
		return Grant{TTL: -1}, nil
	}
	if f.holder == "" && (len(f.queue) == 0 || f.queue[0] == r.Owner) {
		f.queue = slices.DeleteFunc(f.queue, func(o string) bool { return o == r.Owner })
		delete(f.places, r.Owner)
		f.record(r.Owner, r.Seq)
		f.take(r.Owner, r.Seq, r.Lease)
		return Grant{Acquired: true, Token: f.token, Holds: 1, Seq: r.Seq, Lease: r.Lease}, nil
	}
	if _, ok := f.places[r.Owner]; !ok {
		if r.Queue == 0 {
			return Grant{TTL: time.Until(f.until)}, nil
		}
		f.queue = append(f.queue, r.Owner)
		f.places[r.Owner] = &fakePlace{seq: r.Seq, lease: r.Lease, timeout: r.Queue, until: time.Now().Add(r.Queue)}
		f.record(r.Owner, r.Seq)
	}
	return f.queued(r.Owner), nil
}

func (f *fairFake) queued(owner string) Grant {
	if f.queue[0] == owner && f.holder != "" {
		return Grant{Queued: true, TTL: time.Until(f.until)}
	}
	return Grant{Queued: true, TTL: -1}
}

func (f *fairFake) Release(ctx context.Context, r Request) (Release, error) {
	f.mu.Lock()
	f.settle()
	if f.holder != r.Owner {
		if r.Hold == 0 {
			f.drop(r.Owner)
		}
		f.mu.Unlock()
		return NotOwner, nil
	}
	f.holder = ""
	ns := f.grantHead()
	f.mu.Unlock()
	f.tell(ns)
	return Freed, nil
}

func (f *fairFake) drop(owner string) {
	f.queue = slices.DeleteFunc(f.queue, func(o string) bool { return o == owner })
	delete(f.places, owner)
}

func (f *fairFake) Abandon(ctx context.Context, r Request) (bool, error) {
	f.mu.Lock()
	if gate := f.gates[r.Owner]; gate != nil {
		f.mu.Unlock()
		<-gate
		f.mu.Lock()
	}
	f.abandoned[r.Owner] = true
	f.drop(r.Owner)
	f.settle()
	freed := f.holder == r.Owner
	if freed {
		f.holder = ""
	}
	ns := f.grantHead()
	f.mu.Unlock()
	f.tell(ns)
	return freed, nil
}

func (f *fairFake) Renew(ctx context.Context, rs []Request, report func(int, Grant, error)) {
	for i, r := range rs {
		if r.Queue > 0 {
			f.mu.Lock()
			stall := f.stall
			f.mu.Unlock()
			if stall != nil {
				f.stalled <- struct{}{}
				<-stall
			}
			g, err, ns := f.refresh(r)
			f.tell(ns)
			report(i, g, err)
			continue
		}
		f.mu.Lock()
		f.renewals = append(f.renewals, r)
		hang := f.hangLeases
		f.mu.Unlock()
		if hang {
			<-ctx.Done()
			report(i, Grant{}, ctx.Err())
			continue
		}
		f.mu.Lock()
		f.settle()
		var err error
		if f.holder == r.Owner {
			f.until = time.Now().Add(r.Lease)
			err = f.leaseErr
		} else {
			err = ErrNotHeld
		}
		f.mu.Unlock()
		report(i, Grant{}, err)
	}
}

func (f *fairFake) refresh(r Request) (Grant, error, []Notice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settle()
	if f.holder == r.Owner {
		return Grant{Acquired: true, Token: f.token, Seq: f.gseq, Lease: f.glease}, nil, nil
	}
	p := f.places[r.Owner]
	if p == nil || f.abandoned[r.Owner] {
		return Grant{}, ErrNotHeld, nil
	}
	if r.Seq > p.seq {
		p.seq = r.Seq
		p.until = time.Now().Add(r.Queue)
		f.record(r.Owner, r.Seq)
	}
	if f.holder == "" && f.queue[0] == r.Owner {
		f.queue = f.queue[1:]
		delete(f.places, r.Owner)
		f.take(r.Owner, p.seq, min(p.lease, p.timeout))
		return Grant{Acquired: true, Token: f.token, Seq: f.gseq, Lease: f.glease}, nil, nil
	}
	ns := f.grantHead()
	return f.queued(r.Owner), nil, ns
}

func (f *fairFake) Watch(ctx context.Context, name string, kind Kind, wake func(Notice)) (func(), error) {
	f.mu.Lock()
	f.wake = wake
	f.mu.Unlock()
	return func() {}, nil
}

// holdBy makes owner the holder for lease, as another process.
func (f *fairFake) holdBy(owner string, lease time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.take(owner, 0, lease)
}

// release frees the lock as its holder would.
func (f *fairFake) release(owner string) {
	if res, _ := f.Release(context.Background(), Request{Owner: owner, Hold: 1}); res != Freed {
		panic("release by a non-holder")
	}
}

func (f *fairFake) deliverHeld() {
	f.mu.Lock()
	ns := f.held
	f.held = nil
	f.mu.Unlock()
	f.tell(ns)
}

func (f *fairFake) state() (holder string, queue []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settle()
	return f.holder, slices.Clone(f.queue)
}

// fairEngine returns an engine on a fairFake whose lock "other" holds for
// an hour; the engine is closed at the end of the test.
func fairEngine(t *testing.T) (*fairFake, *Engine) {
	f := newFairFake()
	e := New(f, nil, nil)
	t.Cleanup(func() { e.Close(context.Background()) })
	f.holdBy("other", time.Hour)
	return f, e
}

var fairSpec = Spec{Name: "x", Kind: Fair, Lease: 30 * time.Second, Renew: true, Queue: 3 * time.Second}

// lockAsync waits for the lock in the background.
func lockAsync(e *Engine, ctx context.Context, s Spec) <-chan *Lease {
	got := make(chan *Lease, 1)
	go func() {
		l, _ := e.Acquire(ctx, s, true)
		got <- l
	}()
	return got
}

// lockErrAsync waits for the lock in the background, for its error.
func lockErrAsync(e *Engine, ctx context.Context, s Spec) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := e.Acquire(ctx, s, true)
		done <- err
	}()
	return done
}

// A granted lease's local deadline is measured from the send time of the
// waiter's last request that the store applied before the grant (gseq),
// whatever the delay of the grant's notice, and although a later refresh
// was on its way: with renewals that never answer, the lease context ends
// exactly at S(gseq) + lease - margin, where lease is the short lease the
// grant set.
func TestGrantedLeaseBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, e := fairEngine(t)
		got := lockAsync(e, context.Background(), fairSpec)
		time.Sleep(2500 * time.Millisecond) // a few refreshes (every 0.5–1 s)
		synctest.Wait()
		f.mu.Lock()
		owner := f.queue[0]
		p := f.places[owner]
		sent := f.applied[owner][p.seq] // S(gseq): the fake applies a request when it is sent
		f.hangLeases, f.holdGrants = true, true
		stall := make(chan struct{})
		f.stall, f.stalled = stall, make(chan struct{}, 1)
		f.mu.Unlock()
		if p.seq < 2 {
			t.Fatalf("place refreshed %d times in 2.5 s, want some", p.seq-1)
		}
		<-f.stalled // the next refresh is on its way, not applied
		f.release("other")
		time.Sleep(200 * time.Millisecond) // the notice is held up
		f.deliverHeld()
		close(stall)
		l := <-got
		if l == nil {
			t.Fatal("not acquired")
		}
		<-l.Context().Done()
		grant := min(fairSpec.Lease, fairSpec.Queue)
		if got, want := time.Since(sent), grant-margin(grant); got != want {
			t.Fatalf("lease context ended %v after S(gseq), want exactly %v", got, want)
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, ErrLockLost) {
			t.Fatalf("cause %v", cause)
		}
	})
}

// A grant's short lease (the queue timeout) is renewed to the full lease
// by the watchdog's first tick, a third of the granted lease after the
// request it is measured from, and not before (a hand-over costs no
// renewal); the lock then lasts beyond the queue timeout.
func TestGrantRenewedAtFirstTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, e := fairEngine(t)
		got := lockAsync(e, context.Background(), fairSpec)
		synctest.Wait()
		f.mu.Lock()
		owner := f.queue[0]
		f.mu.Unlock()
		f.release("other")
		l := <-got
		synctest.Wait()
		f.mu.Lock()
		sent := f.applied[owner][f.gseq] // S(gseq)
		renewals := len(f.renewals)
		f.mu.Unlock()
		if renewals != 0 {
			t.Fatalf("%d renewals right after the grant, want none", renewals)
		}
		grant := min(fairSpec.Lease, fairSpec.Queue)
		time.Sleep(time.Until(sent.Add(grant / 3)))
		synctest.Wait()
		f.mu.Lock()
		renewed := slices.Clone(f.renewals)
		f.mu.Unlock()
		if len(renewed) != 1 || renewed[0].Lease != fairSpec.Lease {
			t.Fatalf("renewals by a third of the granted lease: %+v, want one to the full lease", renewed)
		}
		time.Sleep(10 * time.Second)
		if l.Context().Err() != nil {
			t.Fatalf("lease ended %v after the grant: %v", time.Since(sent), context.Cause(l.Context()))
		}
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// A fixed lease (no watchdog) granted with the queue timeout gets one
// renewal, at once, to its full length, and no other.
func TestGrantedFixedLeaseRenewedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, e := fairEngine(t)
		spec := fairSpec
		spec.Renew = false
		got := lockAsync(e, context.Background(), spec)
		synctest.Wait()
		f.release("other")
		l := <-got
		start := time.Now()
		<-l.Context().Done()
		f.mu.Lock()
		renewals := slices.Clone(f.renewals)
		f.mu.Unlock()
		if len(renewals) != 1 || renewals[0].Lease != spec.Lease {
			t.Fatalf("renewals of a granted fixed lease: %+v, want one to its full length", renewals)
		}
		if lasted := time.Since(start); lasted != spec.Lease-margin(spec.Lease) {
			t.Fatalf("the fixed lease lasted %v after the grant, want %v", lasted, spec.Lease-margin(spec.Lease))
		}
	})
}

// A place that expired on the store (the waiter was paused) is found at
// the next refresh: its owner is abandoned, and the waiter queues again as
// a new owner, which gets the lock.
func TestEvictedPlaceQueuesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, e := fairEngine(t)
		got := lockAsync(e, context.Background(), fairSpec)
		synctest.Wait()
		f.mu.Lock()
		first := f.queue[0]
		f.drop(first) // expired while the waiter was away
		f.mu.Unlock()
		time.Sleep(time.Second) // the next refresh
		synctest.Wait()
		holder, queue := f.state()
		f.mu.Lock()
		abandoned := f.abandoned[first]
		f.mu.Unlock()
		if !abandoned || len(queue) != 1 || queue[0] == first || holder != "other" {
			t.Fatalf("after eviction: abandoned %v, queue %v, holder %q; want the old owner abandoned and a new place", abandoned, queue, holder)
		}
		f.release("other")
		if l := <-got; l == nil {
			t.Fatal("not acquired")
		} else {
			l.Unlock(context.Background())
		}
	})
}

// A place whose end the store tells (a Notice with Gone) queues again at
// once, with no refresh: the old owner is abandoned, and a new place
// takes its turn. A Gone notice for an owner granted meanwhile changes
// nothing.
func TestGonePlaceQueuesAgainAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, e := fairEngine(t)
		got := lockAsync(e, context.Background(), fairSpec)
		synctest.Wait()
		start := time.Now()
		f.mu.Lock()
		first := f.queue[0]
		f.drop(first) // deleted, or its lease expired
		f.mu.Unlock()
		f.tell([]Notice{{Grantee: GranteeID(first), Gone: true}})
		synctest.Wait()
		holder, queue := f.state()
		f.mu.Lock()
		abandoned := f.abandoned[first]
		f.mu.Unlock()
		if !abandoned || len(queue) != 1 || queue[0] == first || holder != "other" || time.Since(start) != 0 {
			t.Fatalf("after a Gone notice: abandoned %v, queue %v, holder %q, %v later; want the old owner abandoned and a new place at once (no time passes on this clock but for a refresh)",
				abandoned, queue, holder, time.Since(start))
		}
		f.release("other")
		l := <-got
		if l == nil {
			t.Fatal("not acquired")
		}
		f.tell([]Notice{{Grantee: GranteeID(queue[0]), Gone: true}}) // too late: it holds
		synctest.Wait()
		if l.Context().Err() != nil {
			t.Fatalf("a Gone notice ended a held lease: %v", context.Cause(l.Context()))
		}
		l.Unlock(context.Background())
	})
}

// A call that queued again as a new owner (its first place ended) and
// then fails does not return while the clean-up of its first owner is on
// its way: nothing of the call may be left when it returns. It waits
// giveUpWait at most for a clean-up that does not answer.
func TestFailedCallAwaitsEarlierOwnersCleanup(t *testing.T) {
	for _, answers := range []bool{true, false} {
		t.Run(fmt.Sprintf("answers=%v", answers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, e := fairEngine(t)
				ctx, cancel := context.WithCancel(context.Background())
				done := lockErrAsync(e, ctx, fairSpec)
				synctest.Wait()
				gate := make(chan struct{})
				f.mu.Lock()
				first := f.queue[0]
				f.gates = map[string]chan struct{}{first: gate}
				f.drop(first) // its lease expired
				f.mu.Unlock()
				f.tell([]Notice{{Grantee: GranteeID(first), Gone: true}})
				synctest.Wait()
				if _, queue := f.state(); len(queue) != 1 || queue[0] == first {
					t.Fatalf("queue %v: want a new owner's place", queue)
				}
				start := time.Now()
				cancel()
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("returned (%v) while the clean-up of its first owner was on its way", err)
				default:
				}
				if answers {
					close(gate)
				} else {
					time.Sleep(giveUpWait)
				}
				err := <-done
				f.mu.Lock()
				abandoned := f.abandoned[first]
				f.mu.Unlock()
				if waited := time.Since(start); !errors.Is(err, context.Canceled) || abandoned != answers || answers && waited != 0 || !answers && waited != giveUpWait {
					t.Fatalf("returned %v after %v, first owner abandoned %v; want context.Canceled, abandoned %v, after %v",
						err, waited, abandoned, answers, map[bool]time.Duration{true: 0, false: giveUpWait}[answers])
				}
				if !answers {
					close(gate)
				}
			})
		})
	}
}

// A grant whose notice is lost is found by the next refresh.
func TestMissedGrantFoundByRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFairFake()
		f.muteGrants = true
		e := New(f, nil, nil)
		defer e.Close(context.Background())
		f.holdBy("other", time.Hour)
		got := lockAsync(e, context.Background(), fairSpec)
		synctest.Wait()
		f.release("other")
		start := time.Now()
		l := <-got
		if waited, period := time.Since(start), min(fairSpec.Queue, fairSpec.Lease)/3; waited > period {
			t.Fatalf("a missed grant was found after %v, more than a refresh period (%v)", waited, period)
		}
		l.Unlock(context.Background())
	})
}

// The first in line takes the lock when its holder's lease runs out
// without a release (the holder died), right at the lease's end.
func TestHeadTakesWhenHolderLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFairFake()
		e := New(f, nil, nil)
		defer e.Close(context.Background())
		const holderLease = 7 * time.Second
		f.holdBy("crashed", holderLease)
		start := time.Now()
		l := <-lockAsync(e, context.Background(), fairSpec)
		if waited := time.Since(start); waited < holderLease || waited > holderLease+10*time.Millisecond {
			t.Fatalf("acquired %v after a crashed holder's %v lease began", waited, holderLease)
		}
		l.Unlock(context.Background())
	})
}

// A waiter whose context ends just as it is granted the lock never leaves
// it behind: either it returns the lease, or the lock goes to the next
// waiter. Tried many times, both orders of the race.
func TestCancelRacingGrant(t *testing.T) {
	for round := 0; round < 50; round++ {
		synctest.Test(t, func(t *testing.T) {
			f, e := fairEngine(t)
			ctx1, cancel1 := context.WithCancel(context.Background())
			first := lockAsync(e, ctx1, fairSpec)
			synctest.Wait()
			second := lockAsync(e, context.Background(), fairSpec)
			synctest.Wait()
			if round%2 == 0 {
				f.release("other")
				cancel1()
			} else {
				cancel1()
				f.release("other")
			}
			if l := <-first; l != nil {
				l.Unlock(context.Background())
			}
			l := <-second
			if l == nil {
				t.Fatalf("round %d: the second waiter did not get the lock", round)
			}
			l.Unlock(context.Background())
			synctest.Wait()
			if holder, queue := f.state(); holder != "" || len(queue) != 0 {
				t.Fatalf("round %d: left behind: holder %q, queue %v", round, holder, queue)
			}
		})
	}
}

// Close ends a queued wait with ErrClosed and removes the place.
func TestCloseRemovesPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFairFake()
		e := New(f, nil, nil)
		f.holdBy("other", time.Hour)
		done := lockErrAsync(e, context.Background(), fairSpec)
		synctest.Wait()
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("wait ended by Close: %v", err)
		}
		if holder, queue := f.state(); holder != "other" || len(queue) != 0 {
			t.Fatalf("after Close: holder %q, queue %v", holder, queue)
		}
	})
}

// TryLock of a queued kind never queues.
func TestQueuedTryLockNeverQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, e := fairEngine(t)
		if _, err := e.Acquire(context.Background(), fairSpec, false); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("TryLock of a held lock: %v", err)
		}
		if _, queue := f.state(); len(queue) != 0 {
			t.Fatalf("TryLock queued: %v", queue)
		}
	})
}

func (f *fairFake) AcquireAll(ctx context.Context, rs []Request) ([]Grant, error) {
	return store.AcquireEach(ctx, f, rs)
}

// confirmingFake is a fairFake whose grants must be confirmed (a
// GrantConfirmer), as the Redis backend's under replica acknowledgement.
type confirmingFake struct{ *fairFake }

func (confirmingFake) ConfirmGrants() bool { return true }

// errUnacked stands for a renewal that the store applied but did not
// acknowledge.
var errUnacked = fmt.Errorf("%w: 0 of 1 replicas", ErrNotReplicated)

// With a GrantConfirmer, a lock taken by the waiter's own acquisition is
// handed out as it is, and a grant made by another owner's release is
// renewed, to the full lease, before Acquire returns it.
func TestGrantConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFairFake()
		e := New(confirmingFake{f}, nil, nil)
		defer e.Close(context.Background())
		l, err := e.Acquire(context.Background(), fairSpec, true)
		if err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		renewals := len(f.renewals)
		f.mu.Unlock()
		if renewals != 0 {
			t.Fatalf("%d renewals of a lock taken by its own acquisition, want none", renewals)
		}
		l.Unlock(context.Background())

		f.holdBy("other", time.Hour)
		got := lockAsync(e, context.Background(), fairSpec)
		synctest.Wait()
		f.release("other")
		l = <-got
		if l == nil {
			t.Fatal("not acquired")
		}
		f.mu.Lock()
		renewed := slices.Clone(f.renewals)
		f.mu.Unlock()
		if len(renewed) != 1 || renewed[0].Lease != fairSpec.Lease {
			t.Fatalf("renewals before a granted lock was handed out: %+v, want one to the full lease", renewed)
		}
		time.Sleep(10 * time.Second) // beyond the granted lease (the queue timeout)
		if l.Context().Err() != nil {
			t.Fatalf("lease ended: %v", context.Cause(l.Context()))
		}
		l.Unlock(context.Background())
	})
}

// A grant whose confirmation is not acknowledged is given up: Acquire
// fails with the confirmation's error, and the lock goes to the next in
// line. The direct acquisition is the backend's to refuse (not here).
func TestGrantNotConfirmedGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFairFake()
		e := New(confirmingFake{f}, nil, nil)
		defer e.Close(context.Background())
		f.holdBy("other", time.Hour)
		done := lockErrAsync(e, context.Background(), fairSpec)
		synctest.Wait()
		f.mu.Lock()
		f.leaseErr = errUnacked
		// Another process's waiter, behind this one.
		f.queue = append(f.queue, "next")
		f.places["next"] = &fakePlace{seq: 1, lease: time.Hour, timeout: time.Hour, until: time.Now().Add(time.Hour)}
		f.mu.Unlock()
		f.release("other")
		err := <-done
		if !errors.Is(err, ErrNotReplicated) || !errors.Is(err, ErrBackend) || errors.Is(err, ErrNotHeld) {
			t.Fatalf("Acquire with an unacknowledged grant: %v, want ErrNotReplicated", err)
		}
		synctest.Wait()
		if holder, queue := f.state(); holder != "next" || len(queue) != 0 {
			t.Fatalf("after the grant was given up: holder %q, queue %v; want the next in line to hold it", holder, queue)
		}
	})
}

// A grant that is gone before its confirmation lands (the lock expired, or
// was deleted) sends the waiter to the back of the queue, as a new owner,
// as a grant that came too late does.
func TestGrantGoneBeforeConfirmation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFairFake()
		f.holdGrants = true
		e := New(confirmingFake{f}, nil, nil)
		defer e.Close(context.Background())
		f.holdBy("other", time.Hour)
		got := lockAsync(e, context.Background(), fairSpec)
		synctest.Wait()
		f.mu.Lock()
		first := f.queue[0]
		f.mu.Unlock()
		f.release("other")
		f.mu.Lock()
		f.holder = "" // deleted before the grantee heard of it
		f.mu.Unlock()
		f.holdBy("another", time.Hour)
		f.deliverHeld()
		synctest.Wait()
		holder, queue := f.state()
		if holder != "another" || len(queue) != 1 || queue[0] == first {
			t.Fatalf("after a grant gone before its confirmation: holder %q, queue %v; want a new place", holder, queue)
		}
		f.release("another")
		f.deliverHeld()
		if l := <-got; l == nil {
			t.Fatal("not acquired")
		} else {
			l.Unlock(context.Background())
		}
	})
}

func (f *fairFake) Close() error { return nil }
