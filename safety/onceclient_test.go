package safety

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
)

// The chaos client's jobs that run once: a share of the workers'
// iterations (clientConfig.OnceRate) call OncePer on one name, or Once on
// a key that changes every OnceWindow (so that each key is delivered to
// several workers, and its run is done early in the window), with a job
// that panics, outlasts its caller's context, fails or succeeds. The
// worker recovers a panic, as net/http does a handler's. Each job and each
// call is recorded (job and once records); oncechecks_test.go checks them.

// Job behaviours.
const (
	jobPanics   = "panic"   // panics (the worker recovers)
	jobOutlasts = "outlast" // returns nil after its caller's context has ended
	jobFails    = "fail"    // returns an error: not recorded, the next delivery runs it
	jobSucceeds = "ok"      // returns nil in time
)

// errJob is the error of a failing job.
var errJob = errors.New("chaos job fails")

// runOnce makes one call of OncePer or Once with a job of a random
// behaviour, and records the call and the job.
func (c *chaosClient) runOnce(rng *rand.Rand) {
	lease := c.cfg.Lease
	owner := c.seq.Add(1)
	per := rng.Intn(2) == 0
	name := c.cfg.OncePer
	if !per {
		name = fmt.Sprintf("%s %d", c.cfg.OnceKey, time.Now().UnixNano()/int64(c.cfg.OnceWindow))
	}
	behaviour := jobSucceeds
	switch x := rng.Float64(); {
	case x < 0.2:
		behaviour = jobPanics
	case x < 0.45:
		behaviour = jobOutlasts
	case x < 0.65:
		behaviour = jobFails
	}
	// Once waits for a run elsewhere (a job lasts half a lease at most);
	// a job that outlasts its caller has a caller that gives up sooner.
	wait := 2 * lease
	if behaviour == jobOutlasts {
		wait = lease / 4
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	work := time.Duration(rng.Int63n(int64(lease / 20)))
	job := func(jctx context.Context, token uint64) error {
		rec := record{K: "job", Client: c.cfg.ID, Owner: owner, Name: name, Token: token, Job: behaviour, Call: mono()}
		rec.Period, _ = distlock.RunPeriod(jctx)
		var lost atomic.Int64 // when the job's lease context ended, if it did
		stop := context.AfterFunc(jctx, func() { lost.Store(mono()) })
		defer stop()
		done := func() {
			rec.Ret, rec.Wall, rec.T = mono(), wall(), lost.Load()
			c.h.write(rec)
		}
		switch behaviour {
		case jobPanics:
			time.Sleep(work) // the job's own work
			done()
			panic("chaos job panics")
		case jobOutlasts:
			select {
			case <-ctx.Done():
			case <-jctx.Done():
			}
			time.Sleep(work) // the job's own work, past its caller's deadline
			done()
			return nil
		case jobFails:
			time.Sleep(work) // the job's own work
			done()
			return errJob
		}
		time.Sleep(work) // the job's own work
		done()
		return nil
	}
	call := mono()
	var panicked bool
	run, err := func() (distlock.Run, error) {
		defer func() {
			if p := recover(); p != nil {
				panicked = true
			}
		}()
		if per {
			return c.locks.OncePer(ctx, name, c.cfg.OncePeriod, job, distlock.WithTTL(lease))
		}
		return c.locks.Once(ctx, name, c.cfg.OnceKeep, job, distlock.WithTTL(lease))
	}()
	// classifyRelease: a call whose context ended before the job ran may
	// return the context's error, wrapping no distlock error (the record
	// could not be read in time).
	rec := record{K: "once", Client: c.cfg.ID, Owner: owner, Name: name, Call: call, Ret: mono(), Wall: wall(), Res: classifyRelease(err), Err: errString(err),
		State: run.State.String(), Token: run.Token, Period: run.Period, RunErr: errText(run.Err), Job: behaviour}
	switch {
	case panicked:
		rec.Res, rec.State = jobPanics, ""
	case errors.Is(err, errJob):
		// The job's own error, joined with those of the record and the
		// release, if any.
		rec.Res = "jobfailed"
		if k := classifyRelease(err); k != "other" {
			rec.Res += "+" + k
		}
	}
	c.h.write(rec)
}

// errText is the text of a Run's Err: an error in this version of the
// library, a string in older ones; "" for none.
func errText(v any) string {
	if s := fmt.Sprint(v); s != "<nil>" {
		return s
	}
	return ""
}
