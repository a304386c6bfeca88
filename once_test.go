package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// oncePer is the body of a "once-per" helper process: for duration, it
// calls OncePer(name, period) every 10 to 40 ms, and prints a line for
// each call: "ran PERIOD TOKEN" for a run it made, "done PERIOD" for a
// call told that the period's run was done, and "busy PERIOD TOKEN" for a
// call told that the holder of TOKEN runs it.
func oncePer(ctx context.Context, c *distlock.Client, name string, period, duration time.Duration) int {
	end := time.Now().Add(duration)
	for time.Now().Before(end) {
		var inJob uint64
		run, err := c.OncePer(ctx, name, period, func(ctx context.Context, token uint64) error {
			p, ok := distlock.RunPeriod(ctx)
			if !ok {
				return errors.New("RunPeriod: no period in the job's context")
			}
			inJob = p
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // a short job
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if run.State == distlock.RanHere && inJob != run.Period {
			fmt.Fprintf(os.Stderr, "the job ran for period %d, OncePer says %d\n", inJob, run.Period)
			return 1
		}
		switch run.State {
		case distlock.RanHere:
			fmt.Println("ran", run.Period, run.Token)
		case distlock.AlreadyDone:
			fmt.Println("done", run.Period)
		default:
			fmt.Println("busy", run.Period, run.Token)
		}
		time.Sleep(time.Duration(10+rand.IntN(30)) * time.Millisecond)
	}
	return 0
}

// Three processes call OncePer every few tens of milliseconds for 20
// periods of 200 ms: no period ran twice, every period that a call was
// told was done ran exactly once, and the runs' tokens increase with
// their periods. A call told that the job runs elsewhere proves nothing
// about its period's run: the holder may run the previous period's job
// past its end, or have taken the lock only to find the record, and no
// call may come after it in that period (the helpers' last period, on a
// loaded machine).
func TestOncePerAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	const period, periods = 200 * time.Millisecond, 20
	var hs []*helper
	for p := 0; p < 3; p++ {
		hs = append(hs, startHelper(t, "once-per", srv.URL(), "report", period.String(), (periods*period).String()))
	}
	runs := map[uint64][]uint64{} // period -> tokens of its runs
	done := map[uint64]bool{}     // periods that a call was told were done
	for _, h := range hs {
		for line := range h.lines {
			f := strings.Fields(line)
			var p, tok uint64
			switch {
			case len(f) == 3 && f[0] == "ran":
				fmt.Sscan(f[1], &p)
				fmt.Sscan(f[2], &tok)
				runs[p] = append(runs[p], tok)
			case len(f) == 2 && f[0] == "done":
				fmt.Sscan(f[1], &p)
				done[p] = true
			}
		}
		if err := h.wait(t); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	if len(runs) < periods/2 {
		t.Fatalf("%d periods of %d ran: the test did not run", len(runs), periods)
	}
	for p, toks := range runs {
		if len(toks) != 1 {
			t.Errorf("period %d: %d runs %v, want 1", p, len(toks), toks)
		}
	}
	for p := range done {
		if len(runs[p]) == 0 {
			t.Errorf("period %d: a call was told it was done, and it did not run", p)
		}
	}
	var lastTok uint64
	for _, p := range slices.Sorted(maps.Keys(runs)) {
		if toks := runs[p]; len(toks) == 1 {
			if toks[0] <= lastTok {
				t.Errorf("period %d ran with token %d, not above the previous run's %d", p, toks[0], lastTok)
			}
			lastTok = toks[0]
		}
	}
}

// OncePer always says what became of the job, even when the lock changes
// hands under it without a record (here a plain Mutex of the same name
// taken and released in a loop): never a Run with no state and no error.
func TestOncePerLockChangesHands(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	var name atomic.Value // the job's name: a new one each round
	name.Store("flicker-0")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if l, err := other.Mutex(name.Load().(string)).TryLock(ctx); err == nil {
				l.Unlock(ctx)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	states := map[distlock.RunState]int{}
	for i := range 300 {
		n := fmt.Sprintf("flicker-%d", i)
		name.Store(n)
		run, err := c.OncePer(ctx, n, time.Hour, func(context.Context, uint64) error { return nil })
		switch {
		case err != nil && !errors.Is(err, distlock.ErrNotAcquired):
			t.Fatal(err)
		case err == nil && run.State == 0:
			t.Fatalf("round %d: OncePer returned no state and no error: %+v", i, run)
		}
		states[run.State]++
	}
	if states[distlock.RanHere] == 0 || states[distlock.RunningElsewhere] == 0 {
		t.Fatalf("outcomes %v: want some runs and some found running", states)
	}
}

// A job whose lock is lost while it runs is not recorded: OncePer says so
// (ErrLockLost) and the next caller in the same period runs it.
func TestOncePerLostLockNotRecorded(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ops, _ := newClient(t, srv)
	ctx := testCtx(t)
	const period = time.Hour
	run, err := c.OncePer(ctx, "lost", period, func(ctx context.Context, _ uint64) error {
		if _, err := ops.Mutex("lost").ForceUnlock(ctx); err != nil {
			return err
		}
		<-ctx.Done() // the lease's context: the loss is seen at the next renewal
		return nil
	}, distlock.WithTTL(300*time.Millisecond))
	if run.State != distlock.RanHere || !errors.Is(err, distlock.ErrLockLost) {
		t.Fatalf("OncePer whose lock was lost: %+v, %v; want ran here and ErrLockLost", run, err)
	}
	again, err := c.OncePer(ctx, "lost", period, func(context.Context, uint64) error { return nil })
	if err != nil || again.State != distlock.RanHere || again.Period != run.Period {
		t.Fatalf("the next call in the same period: %+v, %v; want it to run", again, err)
	}
	if done, err := c.OncePer(ctx, "lost", period, func(context.Context, uint64) error { return nil }); err != nil || done.State != distlock.AlreadyDone || done.Token != again.Token {
		t.Fatalf("after a recorded run: %+v, %v; want already done by token %d", done, err, again.Token)
	}
}

// Of concurrent callers of Once, one runs the job and the others wait for
// its outcome and are told it was done, by whom and how it ended (its
// failure is recorded, with WithFailuresRecorded); a later caller is told
// so at once.
func TestOnceConcurrentCallers(t *testing.T) {
	srv := redistest.Start(t)
	c1, _ := newClient(t, srv)
	c2, _ := newClient(t, srv)
	ctx := testCtx(t)
	var ran atomic.Int32
	job := func(ctx context.Context, token uint64) error {
		ran.Add(1)
		time.Sleep(100 * time.Millisecond)
		return errors.New("config half loaded")
	}
	var wg sync.WaitGroup
	runs := make([]distlock.Run, 6)
	errs := make([]error, 6)
	for i := range runs {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		wg.Go(func() { runs[i], errs[i] = c.Once(ctx, "config:init", time.Hour, job, distlock.WithFailuresRecorded()) })
	}
	wg.Wait()
	if ran.Load() != 1 {
		t.Fatalf("the job ran %d times", ran.Load())
	}
	here := 0
	for i, r := range runs {
		switch r.State {
		case distlock.RanHere:
			here++
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "config half loaded") {
				t.Errorf("the runner's error: %v, want the job's", errs[i])
			}
		case distlock.AlreadyDone:
			if errs[i] != nil || r.Err != distlock.RecordedError("config half loaded") || r.By.PID != os.Getpid() || r.At.IsZero() {
				t.Errorf("a waiting caller: %+v, %v", r, errs[i])
			}
		default:
			t.Errorf("caller %d: %+v, %v", i, r, errs[i])
		}
	}
	if here != 1 {
		t.Fatalf("%d callers ran it", here)
	}
	if r, err := c2.Once(ctx, "config:init", time.Hour, job); err != nil || r.State != distlock.AlreadyDone || r.Err == nil {
		t.Fatalf("a later caller: %+v, %v", r, err)
	}
}

// onceStuck is the body of a "once-stuck" helper process: it runs a job
// under Once that never ends, printing "running" once inside.
func onceStuck(ctx context.Context, c *distlock.Client, key string) int {
	_, err := c.Once(ctx, key, time.Hour, func(ctx context.Context, token uint64) error {
		fmt.Println("running")
		select {}
	}, distlock.WithTTL(time.Second))
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// A caller that dies halfway through a Once leaves the key runnable again
// once its lease ends: the next caller runs the job.
func TestOnceRunnerCrashes(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	h := startHelper(t, "once-stuck", srv.URL(), "migrate")
	h.expect(t, "running")
	h.signal(t, syscall.SIGKILL)
	ran := false
	run, err := c.Once(ctx, "migrate", time.Hour, func(ctx context.Context, token uint64) error {
		ran = true
		return nil
	}, distlock.WithTTL(time.Second))
	if err != nil || run.State != distlock.RanHere || !ran {
		t.Fatalf("after the runner died: %+v, %v, ran %v", run, err, ran)
	}
}

// Do takes any Locker, runs the job with its lease and unlocks, even when
// the job panics; the job's error comes back joined with the unlock's.
func TestDo(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	rw := c.RWMutex("do-rw")
	sem := c.Semaphore("do-sem", 2)
	lockers := map[string]distlock.Locker{
		"Mutex":      c.Mutex("do-m"),
		"FairMutex":  c.FairMutex("do-f"),
		"RWMutex":    rw,
		"RLocker":    rw.RLocker(),
		"Semaphore":  sem.Locker(2),
		"MultiMutex": c.MultiMutex([]string{"do-a", "do-b"}),
	}
	boom := errors.New("boom")
	for name, l := range lockers {
		var token uint64
		err := distlock.Do(ctx, l, func(ctx context.Context, tok uint64) error {
			token = tok
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return boom
		})
		if !errors.Is(err, boom) || token == 0 {
			t.Errorf("%s: %v (token %d), want the job's error", name, err, token)
		}
		// Unlocked: it can be taken again at once.
		if err := distlock.Do(ctx, l, func(context.Context, uint64) error { return nil }); err != nil {
			t.Errorf("%s taken again: %v", name, err)
		}
	}
	func() {
		defer func() { recover() }()
		distlock.Do(ctx, c.Mutex("do-panic"), func(context.Context, uint64) error { panic("job panics") })
	}()
	if info, _ := c.Mutex("do-panic").Inspect(ctx); info.Locked {
		t.Fatal("a panicking job left the lock held")
	}
}
