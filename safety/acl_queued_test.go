package safety

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// aclQueuedWorkload does, as user, what an application does with the kinds
// beyond the mutexes, after SCRIPT FLUSH: a read-write lock (a writer
// holds, a reader waits in the queue and is granted the lock by the
// writer's release, two more readers take it concurrently, a writer's
// TryLock is refused while they read), a semaphore (2 permits of 3 taken,
// a waiter for 2 queued and let in by the release, SetPermits, Inspect), an
// election (Campaign, Leader, a second candidate that leads once the first
// resigns with Unlock), Client.OncePer and Client.Once (the job runs once,
// the second caller is told it was done), and a MultiMutex (both members
// held together, then free). Each step checks its outcome. Waiting is
// awaited through EventWaiting, never slept for. It returns the first
// failure.
func aclQueuedWorkload(t *testing.T, srv *redistest.Server, admin *redis.Client, user, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		return err
	}
	// client returns a client of user whose events a step can wait for.
	client := func() (*distlock.Client, *eventWaiter) {
		ev := newEventWaiter()
		c := distlock.New(redisstore.New(userClient(t, srv, user)), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
		t.Cleanup(func() { c.Close() })
		return c, ev
	}
	opts := []distlock.MutexOption{distlock.WithTTL(time.Minute), distlock.WithQueueTimeout(time.Minute)}
	type result struct {
		l   *distlock.Lease
		err error
	}
	// waiting starts acquire in the background and returns once its
	// client reports that it waits in the queue.
	waiting := func(ev *eventWaiter, acquire func() (*distlock.Lease, error)) (<-chan result, error) {
		got := make(chan result, 1)
		go func() {
			l, err := acquire()
			got <- result{l, err}
		}()
		select {
		case <-ev.ch[distlock.EventWaiting]:
			return got, nil
		case r := <-got:
			return nil, fmt.Errorf("did not wait: %v, %v", r.l, r.err)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a, _ := client()

	// Read-write lock.
	rwName := prefix + "-rw"
	w, err := a.RWMutex(rwName, opts...).Lock(ctx)
	if err != nil {
		return fmt.Errorf("rw: Lock: %w", err)
	}
	rc, rev := client()
	if _, err := rc.RWMutex(rwName, opts...).TryRLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
		return fmt.Errorf("rw: TryRLock while written: %v", err)
	}
	reader, err := waiting(rev, func() (*distlock.Lease, error) { return rc.RWMutex(rwName, opts...).RLock(ctx) })
	if err != nil {
		return fmt.Errorf("rw: reader: %w", err)
	}
	info, err := a.RWMutex(rwName).Inspect(ctx)
	if err != nil || info.Mode != "write" || info.Writer == nil || info.Writer.Token != w.Token() || info.QueuedReaders != 1 || info.Kind != distlock.KindRWMutex {
		return fmt.Errorf("rw: inspect while written with a reader queued: %+v, %v", info, err)
	}
	if err := w.Unlock(ctx); err != nil {
		return fmt.Errorf("rw: Unlock: %w", err)
	}
	r1 := <-reader
	if r1.err != nil || r1.l.Token() <= w.Token() {
		return fmt.Errorf("rw: the queued reader after the release: %v (token %v, the writer's %d)", r1.err, r1.l, w.Token())
	}
	both := make(chan result, 2)
	for range 2 {
		go func() {
			l, err := a.RWMutex(rwName, opts...).RLock(ctx)
			both <- result{l, err}
		}()
	}
	readers := []*distlock.Lease{r1.l}
	for range 2 {
		r := <-both
		if r.err != nil {
			return fmt.Errorf("rw: concurrent RLock: %w", r.err)
		}
		readers = append(readers, r.l)
	}
	if _, err := rc.RWMutex(rwName, opts...).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
		return fmt.Errorf("rw: TryLock while read: %v", err)
	}
	info, err = a.RWMutex(rwName).Inspect(ctx)
	if err != nil || info.Mode != "read" || len(info.Readers) != 3 || info.Writer != nil {
		return fmt.Errorf("rw: inspect with three readers: %+v, %v", info, err)
	}
	for _, l := range readers {
		if err := l.Unlock(ctx); err != nil {
			return fmt.Errorf("rw: reader's Unlock: %w", err)
		}
	}
	if info, err = a.RWMutex(rwName).Inspect(ctx); err != nil || info.Mode != "" || len(info.Readers) != 0 {
		return fmt.Errorf("rw: inspect after the readers left: %+v, %v", info, err)
	}

	// Semaphore.
	semName := prefix + "-sem"
	two, err := a.Semaphore(semName, 3, opts...).Acquire(ctx, 2)
	if err != nil {
		return fmt.Errorf("sem: Acquire 2: %w", err)
	}
	sc, sev := client()
	waiter, err := waiting(sev, func() (*distlock.Lease, error) { return sc.Semaphore(semName, 3, opts...).Acquire(ctx, 2) })
	if err != nil {
		return fmt.Errorf("sem: waiter for 2: %w", err)
	}
	// One permit is free, but a waiter is ahead: first come, first served.
	if _, err := a.Semaphore(semName, 3, opts...).TryAcquire(ctx, 1); !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
		return fmt.Errorf("sem: TryAcquire 1 with a waiter ahead: %v", err)
	}
	sinfo, err := a.Semaphore(semName, 3).Inspect(ctx)
	if err != nil || sinfo.Capacity != 3 || sinfo.InUse != 2 || sinfo.Queued != 1 || sinfo.QueuedPermits != 2 || len(sinfo.Holders) != 1 || sinfo.Kind != distlock.KindSemaphore {
		return fmt.Errorf("sem: inspect with 2 permits held and a waiter for 2: %+v, %v", sinfo, err)
	}
	if err := two.Unlock(ctx); err != nil {
		return fmt.Errorf("sem: Unlock: %w", err)
	}
	wr := <-waiter
	if wr.err != nil || wr.l.Token() <= two.Token() {
		return fmt.Errorf("sem: the waiter after the release: %v (token %v, the holder's %d)", wr.err, wr.l, two.Token())
	}
	if err := a.Semaphore(semName, 3).SetPermits(ctx, 4); err != nil {
		return fmt.Errorf("sem: SetPermits 4: %w", err)
	}
	more, err := a.Semaphore(semName, 3, opts...).TryAcquire(ctx, 2)
	if err != nil {
		return fmt.Errorf("sem: TryAcquire 2 of the 4: %w", err)
	}
	if sinfo, err = a.Semaphore(semName, 3).Inspect(ctx); err != nil || sinfo.Capacity != 4 || sinfo.InUse != 4 || len(sinfo.Holders) != 2 {
		return fmt.Errorf("sem: inspect with 4 permits of 4 held: %+v, %v", sinfo, err)
	}
	for _, l := range []*distlock.Lease{wr.l, more} {
		if err := l.Unlock(ctx); err != nil {
			return fmt.Errorf("sem: Unlock: %w", err)
		}
	}
	if sinfo, err = a.Semaphore(semName, 3).Inspect(ctx); err != nil || sinfo.InUse != 0 || len(sinfo.Holders) != 0 {
		return fmt.Errorf("sem: inspect after the releases: %+v, %v", sinfo, err)
	}

	// Election.
	elName := prefix + "-elect"
	lead, err := a.Election(elName, opts...).Campaign(ctx, "first")
	if err != nil {
		return fmt.Errorf("election: Campaign: %w", err)
	}
	if ld, err := a.Election(elName).Leader(ctx); err != nil || ld.Value != "first" || ld.Term != lead.Token() {
		return fmt.Errorf("election: Leader: %+v, %v", ld, err)
	}
	ec, eev := client()
	next, err := waiting(eev, func() (*distlock.Lease, error) { return ec.Election(elName, opts...).Campaign(ctx, "second") })
	if err != nil {
		return fmt.Errorf("election: second candidate: %w", err)
	}
	if err := lead.Unlock(ctx); err != nil {
		return fmt.Errorf("election: resign: %w", err)
	}
	second := <-next
	if second.err != nil {
		return fmt.Errorf("election: the second candidate after the resignation: %w", second.err)
	}
	if ld, err := a.Election(elName).Leader(ctx); err != nil || ld.Value != "second" || ld.Term != second.l.Token() || ld.Term <= lead.Token() {
		return fmt.Errorf("election: Leader after the resignation: %+v, %v", ld, err)
	}
	if err := second.l.Unlock(ctx); err != nil {
		return fmt.Errorf("election: second resigns: %w", err)
	}
	if ld, err := a.Election(elName).Leader(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		return fmt.Errorf("election: Leader with nobody leading: %+v, %v", ld, err)
	}

	// OncePer and Once: the job runs once; the second caller is told.
	ran := 0
	job := func(ctx context.Context, token uint64) error {
		if token == 0 {
			return errors.New("no token")
		}
		ran++
		return nil
	}
	oc, _ := client()
	first, err := a.OncePer(ctx, prefix+"-per", 24*time.Hour, job, opts...)
	if err != nil || first.State != distlock.RanHere || ran != 1 {
		return fmt.Errorf("OncePer: %+v, %v (ran %d times)", first, err, ran)
	}
	again, err := oc.OncePer(ctx, prefix+"-per", 24*time.Hour, job, opts...)
	// A day's period ends between the calls once in a long while: the
	// second call then runs the next period's job.
	crossed := err == nil && again.State == distlock.RanHere && again.Period != first.Period
	if !crossed && (err != nil || again.State != distlock.AlreadyDone || again.Err != nil || ran != 1) {
		return fmt.Errorf("OncePer again: %+v, %v (ran %d times)", again, err, ran)
	}
	ran = 0
	if run, err := a.Once(ctx, prefix+"-once", time.Minute, job, opts...); err != nil || run.State != distlock.RanHere || ran != 1 {
		return fmt.Errorf("Once: %+v, %v (ran %d times)", run, err, ran)
	}
	if run, err := oc.Once(ctx, prefix+"-once", time.Minute, job, opts...); err != nil || run.State != distlock.AlreadyDone || run.Err != nil || ran != 1 {
		return fmt.Errorf("Once again: %+v, %v (ran %d times)", run, err, ran)
	}

	// MultiMutex: both members together, then both free.
	members := []string{prefix + "-m2", prefix + "-m1"}
	ml, err := a.MultiMutex(members, opts...).Lock(ctx)
	if err != nil {
		return fmt.Errorf("multi: Lock: %w", err)
	}
	if toks := ml.Tokens(); len(toks) != 2 || toks[members[0]] == 0 || toks[members[1]] == 0 {
		return fmt.Errorf("multi: tokens %v", toks)
	}
	for _, n := range members {
		if _, err := oc.Mutex(n).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
			return fmt.Errorf("multi: TryLock of member %s while held: %v", n, err)
		}
	}
	if err := ml.Unlock(ctx); err != nil {
		return fmt.Errorf("multi: Unlock: %w", err)
	}
	for _, n := range slices.Sorted(slices.Values(members)) {
		l, err := oc.Mutex(n).TryLock(ctx)
		if err != nil {
			return fmt.Errorf("multi: TryLock of member %s after the release: %w", n, err)
		}
		if err := l.Unlock(ctx); err != nil {
			return fmt.Errorf("multi: Unlock of member %s: %w", n, err)
		}
	}
	return nil
}

// The README's ACL, the plain rules and the sorted-set rules of the queues
// (aclRules + aclFairExtra), covers every kind: the read-write lock, the
// semaphore, the election, the once helpers and the multi-lock work under
// it (TestACLFairUser covers the mutexes).
func TestACLQueuedKinds(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	setACLUser(t, admin, "queued-locker", append(slices.Clone(aclRules), aclFairExtra...))
	if err := aclQueuedWorkload(t, srv, admin, "queued-locker", "acl-queued"); err != nil {
		t.Fatalf("queued kinds under the ACL: %v", err)
	}
}
