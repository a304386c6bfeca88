package safety

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// lateReplyHook makes the first acquire script on key arrive after the
// lease deadline (it runs on the server at once; only its reply is late,
// as with a slow network), and holds the first clean-up, abandon.lua (the
// engine's background clean-up of that late hold) until the next acquire
// script on key has returned.
type lateReplyHook struct {
	key   string
	delay time.Duration

	mu            sync.Mutex
	acquires      int
	cleanupHeld   bool
	secondAcquire chan struct{} // closed when the second acquire returned
	cleanupDone   chan struct{} // closed when the held clean-up returned
}

func (h *lateReplyHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lateReplyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *lateReplyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name, keys, _, ok := redisbackend.ScriptCall(cmd.Args())
		if !ok || len(keys) == 0 || keys[0] != h.key {
			return next(ctx, cmd)
		}
		switch name {
		case "acquire":
			h.mu.Lock()
			h.acquires++
			n := h.acquires
			h.mu.Unlock()
			start := time.Now()
			err := next(ctx, cmd)
			if n == 1 {
				time.Sleep(time.Until(start.Add(h.delay)))
			}
			if n == 2 {
				close(h.secondAcquire)
			}
			return err
		case "abandon": // the clean-up
			h.mu.Lock()
			first := !h.cleanupHeld
			h.cleanupHeld = true
			h.mu.Unlock()
			if !first {
				return next(ctx, cmd)
			}
			select {
			case <-h.secondAcquire:
			case <-time.After(5 * time.Second):
			}
			err := next(ctx, cmd)
			close(h.cleanupDone)
			return err
		}
		return next(ctx, cmd)
	}
}

// Mutual exclusion when an acquisition's reply comes after its lease
// deadline: the engine releases that late hold in the background, and Lock
// retries. The retry must never be the victim of that clean-up (it was, when
// every attempt of a Lock call used one owner id: the chaos run found a loss
// signalled 3.6 ms after the holder's own process deleted the key; seed
// 20261122, 9 min). Found by this suite (bug 1).
func TestLateReplyRetryKeepsItsLock(t *testing.T) {
	srv := redistest.Start(t)
	const lease = time.Second
	hook := &lateReplyHook{key: "distlock:{race}", delay: lease - 10*time.Millisecond,
		secondAcquire: make(chan struct{}), cleanupDone: make(chan struct{})}
	rdb := srv.Client(t)
	rdb.AddHook(hook)
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer c.Close()
	other, _ := newLocks(t, srv)
	ctx := testCtx(t)
	if l, err := c.Mutex("warm").Lock(ctx); err == nil { // load the scripts
		l.Unlock(ctx)
	}

	l, err := c.Mutex("race", distlock.WithTTL(lease)).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	select {
	case <-hook.cleanupDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the late hold was not cleaned up")
	}
	if l.Context().Err() != nil {
		t.Skipf("the lease was already cancelled (%v): not this interleaving", context.Cause(l.Context()))
	}
	if n := rdb.Exists(ctx, "distlock:{race}").Val(); n == 0 {
		t.Errorf("Lock returned a lease (context live) whose lock its own clean-up deleted")
	}
	if o, err := other.Mutex("race").TryLock(ctx); err == nil {
		t.Errorf("another client acquired the lock (token %d) while the lease of token %d is live: two holders", o.Token(), l.Token())
		o.Unlock(ctx)
	}
}
