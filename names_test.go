package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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

// unusualNames are lock names the API accepts (names.go) that a script or
// a parser could trip on: spaces (one, several, leading, trailing),
// characters special to Lua patterns, globs, quoting and escapes, text
// that looks like the fields of a stored record, the separators of the
// keys and channels, and the longest name.
var unusualNames = []string{
	"a b",
	"  lead",
	"trail ",
	"multi  space",
	"x%y*z?[",
	"quote'\"\\",
	"锁 名",
	":grant:",
	"f 1 2 3 4 :grant:0123456789abcdef 7 h",
	strings.Repeat("n ", distlock.MaxNameLen/2),
}

// spacedPrefix is a key prefix with spaces, which the API accepts too.
const spacedPrefix = " a prefix: with  spaces "

// A contender takes one kind of lock on a name, as its holder or as a
// second owner that has to wait: release hands it to the waiter.
type contender struct {
	kind string
	// queued: waiters keep a place in a queue, refreshed, and can be
	// granted the lock by a refresh.
	queued bool
	hold   func(ctx context.Context, c *distlock.Client, name string, opts ...distlock.MutexOption) (*distlock.Lease, error)
	wait   func(ctx context.Context, c *distlock.Client, name string, opts ...distlock.MutexOption) (*distlock.Lease, error)
}

// otherMember is a second name for a multi-lock with name, as long as
// names may be.
func otherMember(name string) string {
	if len(name) < distlock.MaxNameLen {
		return name + "2"
	}
	return "2" + name[1:]
}

var contenders = []contender{
	{kind: "mutex",
		hold: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.Mutex(name, o...).Lock(ctx)
		},
		wait: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.Mutex(name, o...).Lock(ctx)
		}},
	{kind: "multi",
		hold: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.MultiMutex([]string{name, otherMember(name)}, o...).Lock(ctx)
		},
		wait: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.MultiMutex([]string{otherMember(name), name}, o...).Lock(ctx)
		}},
	{kind: "fair", queued: true,
		hold: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.FairMutex(name, o...).Lock(ctx)
		},
		wait: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.FairMutex(name, o...).Lock(ctx)
		}},
	{kind: "write-then-read", queued: true,
		hold: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.RWMutex(name, o...).Lock(ctx)
		},
		wait: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.RWMutex(name, o...).RLock(ctx)
		}},
	{kind: "read-then-write", queued: true,
		hold: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.RWMutex(name, o...).RLock(ctx)
		},
		wait: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.RWMutex(name, o...).Lock(ctx)
		}},
	{kind: "semaphore", queued: true,
		hold: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.Semaphore(name, 2, o...).Acquire(ctx, 2)
		},
		wait: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.Semaphore(name, 2, o...).Acquire(ctx, 1)
		}},
	{kind: "election", queued: true,
		hold: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.Election(name, o...).Campaign(ctx, "leader of "+name)
		},
		wait: func(ctx context.Context, c *distlock.Client, name string, o ...distlock.MutexOption) (*distlock.Lease, error) {
			return c.Election(name, o...).Campaign(ctx, "next of "+name)
		}},
}

// Every kind of lock works with every name and prefix the API accepts,
// contended: a waiter keeps its place through its refreshes and is
// granted the lock by the holder's release; a waiter first in line takes
// the lock at its refresh when the holder's lease ran out; an operator's
// ForceUnlock reaches the holder's process. (Names with a space broke
// the queued kinds: a place's stored record was parsed on spaces.)
func TestUnusualNamesAndPrefixes(t *testing.T) {
	srv := redistest.Start(t)
	for i, name := range unusualNames {
		prefix := redisstore.DefaultPrefix
		if i%2 == 1 {
			prefix = spacedPrefix
		}
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			t.Parallel()
			contendUnusual(t, srv, prefix, name)
		})
	}
	t.Run("plain name, spaced prefix", func(t *testing.T) {
		t.Parallel()
		contendUnusual(t, srv, spacedPrefix, "plain")
	})
}

// contendUnusual runs every contender on name under prefix.
func contendUnusual(t *testing.T, srv *redistest.Server, prefix, name string) {
	ctx := testCtx(t)
	watch := newScriptWatch()
	hrdb, wrdb := srv.Client(t), srv.Client(t)
	hrdb.AddHook(watch)
	wrdb.AddHook(watch)
	holder := distlock.New(redisstore.New(hrdb, redisstore.WithPrefix(prefix)), distlock.WithLogger(nil))
	t.Cleanup(func() { holder.Close() })
	refreshed := watch.refreshed
	waiting := make(chan struct{}, 1)
	waiter := distlock.New(redisstore.New(wrdb, redisstore.WithPrefix(prefix)), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	}))
	t.Cleanup(func() { waiter.Close() })
	queue := distlock.WithQueueTimeout(300 * time.Millisecond) // a refresh every 100 ms

	for _, k := range contenders {
		// Granted by the holder's release, after the waiter's place was
		// refreshed.
		drain(waiting)
		h, err := k.hold(ctx, holder, name, queue)
		if err != nil {
			t.Fatalf("%s %q: hold: %v", k.kind, name, err)
		}
		got := make(chan error, 1)
		var next *distlock.Lease
		go func() {
			var err error
			next, err = k.wait(ctx, waiter, name, queue)
			got <- err
		}()
		awaitSignal(t, waiting, k.kind+" waiting")
		if k.queued {
			drain(refreshed)
			awaitSignal(t, refreshed, k.kind+" refresh")
			awaitSignal(t, refreshed, k.kind+" second refresh")
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatalf("%s %q: unlock: %v", k.kind, name, err)
		}
		watch.check(t)
		if err := <-got; err != nil {
			t.Fatalf("%s %q: the waiter, after the holder's release: %v", k.kind, name, err)
		}
		if next.Token() <= h.Token() {
			t.Fatalf("%s %q: token %d after %d", k.kind, name, next.Token(), h.Token())
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatalf("%s %q: waiter's unlock: %v", k.kind, name, err)
		}

		if !k.queued {
			continue
		}
		// Taken at a refresh by the waiter first in line, once the
		// holder's lease ran out without a release.
		h, err = k.hold(ctx, holder, name, distlock.WithFixedLease(300*time.Millisecond))
		if err != nil {
			t.Fatalf("%s %q: hold: %v", k.kind, name, err)
		}
		go func() {
			var err error
			next, err = k.wait(ctx, waiter, name, queue)
			got <- err
		}()
		if err := <-got; err != nil {
			t.Fatalf("%s %q: the waiter, after the holder's lease ended: %v", k.kind, name, err)
		}
		// The holder's context ends with the expiry. That it ends before
		// the waiter gets the lock rests on the holder's timer firing
		// within the margin (11 ms of this 300 ms lease): a loaded CI
		// machine once fired it later (the waiter came first). The store
		// conformance suite checks that order with an 8 s lease
		// (LeaseEndsBeforeOthersHold); here, what matters is the name.
		select {
		case <-h.Context().Done():
		case <-ctx.Done():
			t.Fatalf("%s %q: the holder's context is live after its fixed lease", k.kind, name)
		}
		if cause := context.Cause(h.Context()); !errors.Is(cause, distlock.ErrLeaseExpired) {
			t.Fatalf("%s %q: the holder's context: %v, want ErrLeaseExpired", k.kind, name, cause)
		}
		_ = h.Unlock(ctx) // its lease ran out: nothing to release

		// An operator's ForceUnlock reaches the holder's process.
		force := forcer(waiter, k.kind, name)
		if force == nil {
			_ = next.Unlock(ctx)
			continue
		}
		if ok, err := force(ctx); err != nil || !ok {
			t.Fatalf("%s %q: force-unlock = %v, %v", k.kind, name, ok, err)
		}
		select {
		case <-next.Context().Done():
		case <-ctx.Done():
			t.Fatalf("%s %q: the holder was not told of the force-unlock", k.kind, name)
		}
		_ = next.Unlock(ctx)
	}
	checkInspect(t, ctx, holder, name)
	watch.check(t)
}

// forcer returns the ForceUnlock of the lock of kind named name, or nil.
func forcer(c *distlock.Client, kind, name string) func(context.Context) (bool, error) {
	switch kind {
	case "fair":
		return c.FairMutex(name).ForceUnlock
	case "write-then-read", "read-then-write":
		return c.RWMutex(name).ForceUnlock
	}
	return nil
}

// checkInspect checks what inspection shows of a holder of name: its
// process and host, read from the lock's stored holder info.
func checkInspect(t *testing.T, ctx context.Context, c *distlock.Client, name string) {
	t.Helper()
	s := c.Semaphore(name, 2)
	l, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	info, err := s.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if info.Capacity != 2 || info.InUse != 1 || len(info.Holders) != 1 || info.Holders[0].PID != os.Getpid() || info.Holders[0].Host != host {
		t.Fatalf("inspect %q: %+v", name, info)
	}
}

// awaitSignal waits for a signal on ch, failing the test after 20 s.
func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s within 20s", what)
	}
}

// drain empties ch.
func drain(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// scriptWatch is a go-redis hook that records every error a distlock
// script replied with, for the whole call or for one item of a batch, and
// signals each refresh whose reply kept a waiter queued.
type scriptWatch struct {
	refreshed chan struct{}
	mu        sync.Mutex
	errs      []string
}

func newScriptWatch() *scriptWatch { return &scriptWatch{refreshed: make(chan struct{}, 64)} }

// check fails the test if a script replied with an error.
func (w *scriptWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) > 0 {
		t.Fatalf("%d script errors, the first: %s", len(w.errs), w.errs[0])
	}
}

func (w *scriptWatch) DialHook(next redis.DialHook) redis.DialHook { return next }
func (w *scriptWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		w.seen(cmd)
		return err
	}
}
func (w *scriptWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			w.seen(cmd)
		}
		return err
	}
}

func (w *scriptWatch) seen(cmd redis.Cmder) {
	name, _, _, ok := redisbackend.ScriptCall(cmd.Args())
	if !ok {
		return
	}
	var rerr redis.Error
	if errors.As(cmd.Err(), &rerr) && !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		w.fail(name, cmd.Err())
		return
	}
	c, _ := cmd.(*redis.Cmd)
	if c == nil {
		return
	}
	items, _ := c.Val().([]any)
	queued := false
	for _, item := range items {
		if err, isErr := item.(error); isErr {
			w.fail(name, err)
		}
		if reply, _ := item.([]any); len(reply) > 0 && reply[0] == int64(2) {
			queued = true
		}
	}
	if name == "refresh" && queued {
		select {
		case w.refreshed <- struct{}{}:
		default:
		}
	}
}

func (w *scriptWatch) fail(script string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, script+": "+err.Error())
}
