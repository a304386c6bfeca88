package distlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/redisstore"
	"github.com/redis/go-redis/v9"
)

// An interceptor is a go-redis hook that does to distlock's scripts on
// given lock keys what a slow or lossy network does: it holds back a reply while
// the script has already run on the server, or loses the reply and lets the
// request itself reach Redis later. Scripts are recognised by
// redisbackend.ScriptCall, so the rules name them ("acquire", "renew",
// "release", ...).
type interceptor struct {
	t *testing.T

	mu    sync.Mutex
	seen  map[string]int
	rules []*rule
}

// A rule acts on the nth call (1-based) of one of its scripts on its key,
// or on every call if nth is 0.
type rule struct {
	key     string
	scripts []string
	nth     int
	lose    bool // lose the reply; the request lands once release is closed
	cut     bool // drop the request: it never reaches Redis
	drop    bool // run the script, then lose its reply
	// delay: the script runs at once, its reply waits until release is closed
	before bool          // hold the request back until release is closed, then send it
	wait   time.Duration // hold the request back this long, then send it

	release     chan struct{} // closed by the test
	matched     chan struct{} // closed when the rule matched (for delay: after the script ran)
	landed      chan struct{} // closed when a lost request has reached Redis
	once        sync.Once
	matchedOnce sync.Once
}

var errReplyLost = errors.New("test: reply lost (i/o timeout)")

func newInterceptor(t *testing.T) *interceptor {
	return &interceptor{t: t, seen: map[string]int{}}
}

// load loads every script on the server, so that no intercepted EVALSHA
// fails with NOSCRIPT (go-redis would then send an EVAL the rules do not
// see, at a moment of its own).
func (h *interceptor) load(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	if err := redisbackend.LoadScripts(t.Context(), rdb); err != nil {
		t.Fatal(err)
	}
}

// on adds a rule for the nth call of any of scripts (comma-separated) on
// the lock named name (with the default prefix).
func (h *interceptor) on(name, scripts string, nth int, lose bool) *rule {
	return h.add(name, scripts, nth, func(r *rule) { r.lose = lose })
}

// add adds a rule for the nth call of any of scripts on the lock name, set
// up by set before any call can see it.
func (h *interceptor) add(name, scripts string, nth int, set func(*rule)) *rule {
	r := &rule{key: redisstore.DefaultPrefix + "{" + name + "}", scripts: strings.Split(scripts, ","), nth: nth,
		release: make(chan struct{}), matched: make(chan struct{}), landed: make(chan struct{})}
	set(r)
	h.mu.Lock()
	h.rules = append(h.rules, r)
	h.mu.Unlock()
	h.t.Cleanup(r.free)
	return r
}

// holdBack adds a rule that holds the nth call of any of scripts on the
// lock name back, before it is sent, until the rule is freed: a request
// held up in the network.
func (h *interceptor) holdBack(name, scripts string, nth int) *rule {
	return h.add(name, scripts, nth, func(r *rule) { r.before = true })
}

// slow adds a rule that holds the nth call of any of scripts on the lock
// name back for d before it is sent: a slow network, for a test that must
// see whether a call waits for that request.
func (h *interceptor) slow(name, scripts string, nth int, d time.Duration) *rule {
	return h.add(name, scripts, nth, func(r *rule) { r.wait = d; r.free() })
}

// observe adds a rule that only reports (matched) the nth call of any of
// scripts on the lock name, once it has run.
func (h *interceptor) observe(name, scripts string, nth int) *rule {
	return h.add(name, scripts, nth, (*rule).free)
}

// cut adds a rule that drops every call of any of scripts on the lock
// name before it is sent, as a partition would: each fails as a lost
// reply would, and none reaches Redis.
func (h *interceptor) cut(name, scripts string) *rule {
	return h.add(name, scripts, 0, func(r *rule) { r.cut = true; r.free() })
}

// dropReplies adds a rule that lets every call of any of scripts on the
// lock name run on the server, then loses its reply: the client cannot
// know what it did.
func (h *interceptor) dropReplies(name, scripts string) *rule {
	return h.add(name, scripts, 0, func(r *rule) { r.drop = true; r.free() })
}

// match reports that the rule matched (idempotent).
func (r *rule) match() { r.matchedOnce.Do(func() { close(r.matched) }) }

// free lets the rule's request or reply go (idempotent).
func (r *rule) free() { r.once.Do(func() { close(r.release) }) }

// await waits for ch, failing the test after 20 s.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// script names the distlock script cmd runs and its first key, or "".
func (h *interceptor) script(cmd redis.Cmder) (name, key string) {
	name, keys, _, ok := redisbackend.ScriptCall(cmd.Args())
	if !ok || len(keys) == 0 {
		return "", ""
	}
	return name, keys[0]
}

// match finds the rule for cmds, counting calls per script.
func (h *interceptor) match(cmds []redis.Cmder) *rule {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cmd := range cmds {
		name, key := h.script(cmd)
		if name == "" {
			continue
		}
		h.seen[name+" "+key]++
		for _, r := range h.rules {
			for _, s := range r.scripts {
				if s == name && r.key == key && (r.nth == 0 || h.seen[name+" "+key] == r.nth) {
					return r
				}
			}
		}
	}
	return nil
}

func (h *interceptor) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *interceptor) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r := h.match([]redis.Cmder{cmd})
		if r == nil {
			return next(ctx, cmd)
		}
		return r.run(ctx, []redis.Cmder{cmd}, func(ctx context.Context, cmds []redis.Cmder) error {
			return next(ctx, cmds[0])
		})
	}
}

func (h *interceptor) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r := h.match(cmds)
		if r == nil {
			return next(ctx, cmds)
		}
		return r.run(ctx, cmds, next)
	}
}

func (r *rule) run(ctx context.Context, cmds []redis.Cmder, next func(context.Context, []redis.Cmder) error) error {
	if r.cut || r.drop {
		if r.drop {
			_ = next(ctx, cmds)
		}
		for _, c := range cmds {
			c.SetErr(errReplyLost)
		}
		r.match()
		return errReplyLost
	}
	if r.before || r.wait > 0 {
		r.match()
		if r.wait > 0 {
			time.Sleep(r.wait) // the fault: a request that is slow to arrive
		}
		select {
		case <-r.release:
		case <-time.After(20 * time.Second):
		}
		// Once on the wire, a request reaches Redis whatever became of
		// the caller's context.
		err := next(context.WithoutCancel(ctx), cmds)
		close(r.landed)
		return err
	}
	if !r.lose {
		err := next(ctx, cmds)
		r.match()
		select {
		case <-r.release:
		case <-time.After(20 * time.Second):
		}
		return err
	}
	copies := make([]redis.Cmder, len(cmds))
	for i, c := range cmds {
		copies[i] = redis.NewCmd(context.Background(), c.Args()...)
		c.SetErr(errReplyLost)
	}
	r.match()
	go func() {
		select {
		case <-r.release:
		case <-time.After(20 * time.Second):
		}
		_ = next(context.Background(), copies)
		close(r.landed)
	}()
	return errReplyLost
}
