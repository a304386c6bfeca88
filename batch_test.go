package distlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// A batchCall is one call of a batch script (renew, shared_renew,
// refresh): when it was sent and the keys it carried.
type batchCall struct {
	sent time.Time
	keys string
}

// batchLog is a go-redis hook that passes on every call of the batch
// script named script (renewals and refreshes are pipelined).
type batchLog struct {
	script string
	calls  chan batchCall
}

func newBatchLog(script string) batchLog { return batchLog{script, make(chan batchCall, 1000)} }

// await waits for a call, sent after since, whose keys contain every one
// of keys.
func (h batchLog) await(t *testing.T, since time.Time, keys ...string) {
	t.Helper()
	for {
		select {
		case c := <-h.calls:
			found := !c.sent.Before(since)
			for _, k := range keys {
				found = found && strings.Contains(c.keys, k)
			}
			if found {
				return
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s call with %q within 20s", h.script, keys)
		}
	}
}

func (h batchLog) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h batchLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h batchLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		sent := time.Now()
		for _, cmd := range cmds {
			if name, keys, _, ok := redisbackend.ScriptCall(cmd.Args()); ok && name == h.script {
				select {
				case h.calls <- batchCall{sent, strings.Join(keys, "\n")}:
				default:
				}
			}
		}
		return next(ctx, cmds)
	}
}

// One waiter's broken lock (a key of the wrong type, set by hand) does not
// touch the other waiters of the same Client, whose places are refreshed
// in the same script calls: a waiter keeps its place past its queue
// timeout and is granted the lock at the holder's release, ahead of the
// waiter that queued after it. (One item's script error failed the whole
// call: every waiter in it lost its place.)
func TestRefreshBatchIsolatesABrokenLock(t *testing.T) {
	srv := redistest.Start(t)
	holder, rdb := newClient(t, srv)
	later, _ := newClient(t, srv)
	wrdb := srv.Client(t)
	log := newBatchLog("refresh")
	wrdb.AddHook(log)
	waiter := distlock.New(redisstore.New(wrdb), distlock.WithLogger(nil))
	t.Cleanup(func() { waiter.Close() })
	ctx := testCtx(t)
	const queue = 600 * time.Millisecond
	var held []*distlock.Lease
	for _, name := range []string{"broken", "sound"} {
		l, err := holder.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	type outcome struct {
		l   *distlock.Lease
		err error
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	lock := func(c *distlock.Client, name string) chan outcome {
		ch := make(chan outcome, 1)
		m := c.FairMutex(name, distlock.WithQueueTimeout(queue))
		queued := 0
		if info, err := m.Inspect(ctx); err == nil {
			queued = info.Queued
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Lock(ctx)
			ch <- outcome{l, err}
		}()
		waitFor(t, func() bool { info, _ := m.Inspect(ctx); return info.Queued == queued+1 })
		return ch
	}
	broken := lock(waiter, "broken")
	sound := lock(waiter, "sound")
	behind := lock(later, "sound")

	deadlines := redisstore.DefaultPrefix + "{broken}:qt"
	rdb.Del(ctx, deadlines)
	rdb.SAdd(ctx, deadlines, "wrong type")
	spoilt := time.Now()
	// Wait for a refresh call that carried both waiters, and for one of
	// the sound waiter after its place would have expired without it.
	log.await(t, spoilt, "{broken}", "{sound}")
	log.await(t, spoilt.Add(queue), "{sound}")
	if err := held[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-sound:
		if o.err != nil {
			t.Fatal(o.err)
		}
		select {
		case o := <-behind:
			t.Fatalf("the waiter queued behind was granted too: %v", o.err)
		default:
		}
		o.l.Unlock(ctx)
	case o := <-behind:
		t.Fatalf("the lock went to the waiter queued behind (%v): the first lost its place", o.err)
	case <-ctx.Done():
		t.Fatal("the sound waiter was not granted the lock")
	}
	if o := <-behind; o.err != nil {
		t.Fatal(o.err)
	} else {
		o.l.Unlock(ctx)
	}

	// Repaired, the broken lock's waiter gets its place back and the lock.
	rdb.Del(ctx, deadlines)
	if err := held[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if o := <-broken; o.err != nil {
		t.Fatalf("the broken lock's waiter after the repair: %v", o.err)
	} else {
		o.l.Unlock(ctx)
	}
}

// One holder's broken lock does not touch the other leases of the same
// Client renewed in the same script calls: a mutex and a semaphore permit
// taken beside it are renewed past their first lease, while the broken
// one is lost. (One item's script error failed the whole call.)
func TestRenewBatchIsolatesABrokenLock(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	crdb := srv.Client(t)
	logs := map[string]batchLog{"mutex": newBatchLog("renew"), "semaphore": newBatchLog("shared_renew")}
	crdb.AddHook(logs["mutex"])
	crdb.AddHook(logs["semaphore"])
	c := distlock.New(redisstore.New(crdb), distlock.WithLogger(nil))
	t.Cleanup(func() { c.Close() })
	ctx := testCtx(t)
	const ttl = 600 * time.Millisecond
	take := func(kind, name string) *distlock.Lease {
		var l *distlock.Lease
		var err error
		if kind == "semaphore" {
			l, err = c.Semaphore(name, 1, distlock.WithTTL(ttl)).Acquire(ctx, 1)
		} else {
			l, err = c.Mutex(name, distlock.WithTTL(ttl)).Lock(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, kind := range []string{"mutex", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			broken, sound := take(kind, kind+" broken"), take(kind, kind+" sound")
			key := redisstore.DefaultPrefix + "{" + kind + " broken}"
			if kind == "semaphore" {
				key += ":h"
			}
			rdb.Del(ctx, key)
			rdb.SAdd(ctx, key, "wrong type")
			first := sound.ValidUntil()
			logs[kind].await(t, time.Now(), "{"+kind+" broken}", "{"+kind+" sound}")
			waitFor(t, func() bool {
				if err := sound.Context().Err(); err != nil {
					t.Fatalf("the sound lease was lost: %v", context.Cause(sound.Context()))
				}
				return broken.Context().Err() != nil && sound.ValidUntil().After(first.Add(ttl))
			})
			rdb.Del(ctx, key)
			broken.Unlock(ctx)
			if err := sound.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
