package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// A job that outlasts its caller's deadline is recorded all the same, and
// its lock released: the next caller finds it done.
func TestOnceOutlivesCallerDeadline(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	run, err := c.Once(short, "slow", time.Hour, func(ctx context.Context, _ uint64) error {
		<-short.Done() // the caller has given up; the job goes on
		return nil
	})
	if err != nil || run.State != distlock.RanHere {
		t.Fatalf("Once past its caller's deadline: %+v, %v; want ran here, no error", run, err)
	}
	if info, err := c.Mutex("slow").Inspect(ctx); err != nil || info.Locked {
		t.Fatalf("after the run: %+v, %v; want the lock free", info, err)
	}
	again, err := c.Once(ctx, "slow", time.Hour, func(context.Context, uint64) error {
		t.Error("the job ran a second time")
		return nil
	})
	if err != nil || again.State != distlock.AlreadyDone || again.Token != run.Token {
		t.Fatalf("the next call: %+v, %v; want already done by token %d", again, err, run.Token)
	}
}

// A job that panics releases its lock, is not recorded, and its panic goes
// on to the caller: the next delivery runs the job.
func TestOncePanicReleasesLock(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	recovered := func() (p any) {
		defer func() { p = recover() }()
		c.Once(ctx, "panics", time.Hour, func(context.Context, uint64) error { panic("job panics") })
		return nil
	}()
	if recovered != "job panics" {
		t.Fatalf("recovered %v, want the job's panic", recovered)
	}
	if info, err := c.Mutex("panics").Inspect(ctx); err != nil || info.Locked {
		t.Fatalf("after the panic: %+v, %v; want the lock free", info, err)
	}
	ran := false
	run, err := c.Once(ctx, "panics", time.Hour, func(context.Context, uint64) error { ran = true; return nil })
	if err != nil || run.State != distlock.RanHere || !ran {
		t.Fatalf("the next call: %+v, %v, ran %v; want it to run the job", run, err, ran)
	}
}

// A nil job is an invalid option, refused before anything is taken, by
// Once, OncePer and Do.
func TestNilJob(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx := testCtx(t)
	if _, err := c.Once(ctx, "nil", time.Hour, nil); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("Once with a nil job: %v, want ErrInvalidOption", err)
	}
	if _, err := c.OncePer(ctx, "nil", time.Hour, nil); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("OncePer with a nil job: %v, want ErrInvalidOption", err)
	}
	if err := distlock.Do(ctx, c.Mutex("nil"), nil); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("Do with a nil job: %v, want ErrInvalidOption", err)
	}
	if err := distlock.Do(ctx, nil, func(context.Context, uint64) error { return nil }); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("Do with a nil Locker: %v, want ErrInvalidOption", err)
	}
	if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Errorf("keys %v left in Redis, want none: nothing taken", keys)
	}
}

// By default a failed run is not recorded: the next call runs the job
// again, until a run succeeds.
func TestOnceFailureRetried(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	boom := errors.New("boom")
	runs := 0
	job := func(context.Context, uint64) error {
		runs++
		if runs == 1 {
			return boom
		}
		return nil
	}
	for _, call := range []func() (distlock.Run, error){
		func() (distlock.Run, error) { return c.Once(ctx, "retry", time.Hour, job) },
		func() (distlock.Run, error) { return c.OncePer(ctx, "retry-per", time.Hour, job) },
	} {
		runs = 0
		first, err := call()
		if first.State != distlock.RanHere || !errors.Is(err, boom) {
			t.Fatalf("a failing run: %+v, %v; want ran here and its error", first, err)
		}
		second, err := call()
		if err != nil || second.State != distlock.RanHere || runs != 2 {
			t.Fatalf("the call after a failed run: %+v, %v (%d runs); want it to run the job again", second, err, runs)
		}
		third, err := call()
		if err != nil || third.State != distlock.AlreadyDone || third.Token != second.Token || runs != 2 {
			t.Fatalf("the call after a successful run: %+v, %v (%d runs); want already done by token %d", third, err, runs, second.Token)
		}
	}
}

// With WithFailuresRecorded, a failed run counts as done: later callers
// are told how it failed, with a RecordedError that errors.Is matches to
// an equal RecordedError only.
func TestOnceFailuresRecorded(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	boom := errors.New("boom")
	first, err := c.Once(ctx, "recorded", time.Hour, func(context.Context, uint64) error {
		return fmt.Errorf("loading: %w", boom)
	}, distlock.WithFailuresRecorded())
	if first.State != distlock.RanHere || !errors.Is(err, boom) || !errors.Is(first.Err, boom) {
		t.Fatalf("a failing run: %+v, %v; want ran here, with the job's error in Run.Err and the error", first, err)
	}
	again, err := other.Once(ctx, "recorded", time.Hour, func(context.Context, uint64) error {
		t.Error("a recorded failure ran again")
		return nil
	})
	var recorded distlock.RecordedError
	switch {
	case err != nil || again.State != distlock.AlreadyDone || again.Token != first.Token:
		t.Fatalf("after a recorded failure: %+v, %v; want already done by token %d", again, err, first.Token)
	case !errors.As(again.Err, &recorded) || recorded != "loading: boom" || again.Err.Error() != "loading: boom":
		t.Fatalf("Run.Err read back: %#v, want RecordedError(%q)", again.Err, "loading: boom")
	case !errors.Is(again.Err, distlock.RecordedError("loading: boom")) || errors.Is(again.Err, boom):
		t.Fatalf("errors.Is on the read-back error: matches itself %v, the job's error %v; want true, false",
			errors.Is(again.Err, distlock.RecordedError("loading: boom")), errors.Is(again.Err, boom))
	}
}

// Forget deletes a job's record: the next call runs it again. ForceUnlock
// does not (it takes a lock away; a record is no lock).
func TestForget(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	runs := 0
	job := func(context.Context, uint64) error { runs++; return nil }
	if _, err := c.Once(ctx, "forget", time.Hour, job); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex("forget").ForceUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if run, err := c.Once(ctx, "forget", time.Hour, job); err != nil || run.State != distlock.AlreadyDone || runs != 1 {
		t.Fatalf("after ForceUnlock: %+v, %v (%d runs); want already done", run, err, runs)
	}
	if forgot, err := c.Forget(ctx, "forget"); err != nil || !forgot {
		t.Fatalf("Forget = %v, %v; want true", forgot, err)
	}
	if run, err := c.Once(ctx, "forget", time.Hour, job); err != nil || run.State != distlock.RanHere || runs != 2 {
		t.Fatalf("after Forget: %+v, %v (%d runs); want it run again", run, err, runs)
	}
	if forgot, err := c.Forget(ctx, "no-record"); err != nil || forgot {
		t.Fatalf("Forget of a job with no record = %v, %v; want false", forgot, err)
	}
	if _, err := c.Forget(ctx, "a{b}"); !errors.Is(err, distlock.ErrInvalidName) {
		t.Fatalf("Forget of an invalid name: %v, want ErrInvalidName", err)
	}
}

// LastRun reads the record of a job, whatever its period; a job with no
// record has none.
func TestLastRun(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	if _, ok, err := c.LastRun(ctx, "report"); err != nil || ok {
		t.Fatalf("LastRun before any run: ok %v, %v; want none", ok, err)
	}
	ran, err := c.OncePer(ctx, "report", time.Hour, func(context.Context, uint64) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	last, ok, err := c.LastRun(ctx, "report")
	host, _ := os.Hostname()
	if err != nil || !ok || last.State != distlock.AlreadyDone || last.Token != ran.Token || last.Period != ran.Period ||
		last.Err != nil || last.By.Host != host || last.By.PID != os.Getpid() || time.Since(last.At).Abs() > time.Minute {
		t.Fatalf("LastRun = %+v, %v, %v; want the run of token %d in period %d, by this process, just now", last, ok, err, ran.Token, ran.Period)
	}
}

// Records as older versions wrote them (they recorded every run, failed
// or not, in the format this one writes) are read: a failed run is done,
// with its error.
func TestOnceReadsOlderRecords(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx := testCtx(t)
	rdb.Set(ctx, redisstore.DefaultPrefix+"{old}:done", "0 1795555189194255 1795555189194 4242 web-1\nexit status 3", time.Hour)
	run, err := c.Once(ctx, "old", time.Hour, func(context.Context, uint64) error {
		t.Error("the job ran again")
		return nil
	})
	if err != nil || run.State != distlock.AlreadyDone || run.Token != 1795555189194255 || run.By.Host != "web-1" ||
		run.By.PID != 4242 || run.At.UnixMilli() != 1795555189194 || run.Err != distlock.RecordedError("exit status 3") {
		t.Fatalf("an older client's record of a failed run: %+v, %v", run, err)
	}
}

// An idempotency key: a failed attempt is not recorded, so the next
// delivery of the message runs the handler again; once it has succeeded,
// later deliveries are told it was done.
func ExampleClient_Once_idempotencyKey() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx := context.Background()

	attempts := 0
	handle := func(ctx context.Context, token uint64) error {
		attempts++
		if attempts == 1 {
			return errors.New("database restarting")
		}
		return nil
	}
	for delivery := 1; delivery <= 3; delivery++ {
		run, err := locks.Once(ctx, "msg:42", 24*time.Hour, handle)
		fmt.Println(delivery, run.State, err)
	}
	// Output:
	// 1 ran here database restarting
	// 2 ran here <nil>
	// 3 already done <nil>
}

// A job that must not be tried twice records its failure too; Forget
// lets it run again, once someone has looked into it.
func ExampleClient_Forget() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx := context.Background()
	migrate := func(ctx context.Context, token uint64) error { return errors.New("column exists") }

	locks.Once(ctx, "migrate:v2", 365*24*time.Hour, migrate, distlock.WithFailuresRecorded())
	run, _ := locks.Once(ctx, "migrate:v2", 365*24*time.Hour, migrate, distlock.WithFailuresRecorded())
	fmt.Println(run.State, "/", run.Err)
	forgot, _ := locks.Forget(ctx, "migrate:v2")
	run, _ = locks.Once(ctx, "migrate:v2", 365*24*time.Hour, migrate, distlock.WithFailuresRecorded())
	fmt.Println(forgot, run.State)
	// Output:
	// already done / column exists
	// true ran here
}

// A Once call whose context has ended before the record could be read
// fails as a Lock does: ErrNotAcquired, with the context's cause.
func TestOnceEndedContextIsNotAcquired(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	_, err := c.Once(ctx, "ended", time.Minute, func(context.Context, uint64) error { ran = true; return nil })
	if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("Once with an ended context: %v (ran %v), want ErrNotAcquired and context.Canceled, not run", err, ran)
	}
	_, err = c.OncePer(ctx, "ended-per", time.Minute, func(context.Context, uint64) error { ran = true; return nil })
	if !errors.Is(err, distlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("OncePer with an ended context: %v (ran %v), want ErrNotAcquired and context.Canceled, not run", err, ran)
	}
}

// A OncePer run longer than its period never overlaps the next period's
// run: a caller that comes in the next period while it runs is told it
// runs elsewhere and does not run the job; the first caller after it ended
// runs the next period's job.
func TestOncePerOverrun(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	const period = 2 * time.Second
	started := make(chan uint64, 1)
	finish := make(chan struct{})
	var finishOnce sync.Once
	end := func() { finishOnce.Do(func() { close(finish) }) }
	t.Cleanup(end) // a failed check must not leave the job running
	first := make(chan distlock.Run, 1)
	go func() {
		run, err := c.OncePer(ctx, "overrun", period, func(ctx context.Context, _ uint64) error {
			p, _ := distlock.RunPeriod(ctx)
			started <- p
			<-finish
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		first <- run
	}()
	p := <-started
	// The server's clock enters the next period while the job runs.
	waitFor(t, func() bool {
		now, err := rdb.Time(ctx).Result()
		return err == nil && uint64(now.UnixNano()/int64(period)) > p
	})
	during, err := other.OncePer(ctx, "overrun", period, func(context.Context, uint64) error {
		t.Error("the next period's job ran while the last one still ran")
		return nil
	})
	if err != nil || during.State != distlock.RunningElsewhere || during.Period <= p {
		t.Fatalf("a call in period %d+ while period %d's run goes on: %+v, %v; want RunningElsewhere", p+1, p, during, err)
	}
	end()
	if run := <-first; run.State != distlock.RanHere || run.Period != p {
		t.Fatalf("the overrunning call: %+v; want RanHere in period %d", run, p)
	}
	ran := false
	after, err := other.OncePer(ctx, "overrun", period, func(context.Context, uint64) error { ran = true; return nil })
	if err != nil || after.State != distlock.RanHere || !ran || after.Period <= p {
		t.Fatalf("the first call after the overrun: %+v, %v (ran %v); want it to run the next period", after, err, ran)
	}
}
