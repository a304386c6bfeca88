package redisbackend

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/store"
)

// oddNames are lock names the public API accepts (1 to 512 bytes of UTF-8
// without control characters or braces) that a script parsing words or
// patterns would trip on.
var oddNames = []string{
	"a b", "  lead", "trail ", "multi  space", "x%y*z?[", "quote'\"\\", "锁 名", ":grant:",
	"f 1 2 3 4 :grant:0123456789abcdef 7 h", strings.Repeat("n ", 256),
}

// A queued kind works under any name and prefix: a place is refreshed, and
// the release grants it with a notice on the grantee's own channel (the
// place's stored record carries the channel; it held the lock name and
// the prefix, and was parsed on spaces).
func TestQueuedKindsUnderOddNames(t *testing.T) {
	srv := redistest.Start(t)
	b := New(GoRedis(srv.Client(t)), Config{Keys: Keys{Prefix: " a prefix: with  spaces "}, FenceRetention: time.Minute,
		Host: "a host with spaces", PID: 7})
	t.Cleanup(func() { b.Close() })
	kinds := []struct {
		holder, waiter store.Request
	}{
		{place("", "h"), place("", "w")},
		{store.Request{Kind: store.Election, Owner: "h", Hold: 1, Lease: time.Minute, Queue: 5 * time.Second, Seq: 1, Value: "v h"},
			store.Request{Kind: store.Election, Owner: "w", Hold: 1, Lease: time.Minute, Queue: 5 * time.Second, Seq: 1, Value: "v w"}},
		{rw("h", store.Write), rw("w", store.Read)},
		{rw("h", store.Read), rw("w", store.Write)},
		{sem("h", 2, 2), sem("w", 1, 2)},
	}
	for _, name := range oddNames {
		g := grants(t, b, name)
		for _, kind := range kinds {
			h, w := kind.holder, kind.waiter
			h.Name, w.Name = name, name
			if got := mustAcquire(t, b, h); !got.Acquired {
				t.Fatalf("%v %q: holder %+v", h.Kind, name, got)
			}
			if got := mustAcquire(t, b, w); !got.Queued {
				t.Fatalf("%v %q: waiter %+v", w.Kind, name, got)
			}
			refresh := w
			refresh.Seq = 2
			var errs []error
			b.Renew(t.Context(), []store.Request{refresh}, func(_ int, g store.Grant, err error) {
				if err == nil && !g.Queued {
					err = errors.New("not queued")
				}
				errs = append(errs, err)
			})
			if len(errs) != 1 || errs[0] != nil {
				t.Fatalf("%v %q: refresh: %v", w.Kind, name, errs)
			}
			if st, err := b.Inspect(t.Context(), name); err != nil || len(st.Holders) != 1 || st.Holders[0].Host != "a host with spaces" || st.Holders[0].PID != 7 {
				t.Fatalf("%v %q: inspect = %+v, %v", h.Kind, name, st, err)
			}
			release(t, b, h, store.Freed)
			if n := nextNotice(t, g); n.Grantee != store.GranteeID("w") || n.Seq != 2 {
				t.Fatalf("%v %q: grant %+v", w.Kind, name, n)
			}
			release(t, b, w, store.Freed)
		}
	}
}

// A place stored by an earlier version, whose record has the same layout,
// is granted too, and a record that no script can read (changed by hand)
// is dropped instead of failing every script that meets it.
func TestPlaceRecords(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	k := b.cfg.Keys
	g := grants(t, b, "a b")
	mustAcquire(t, b, place("a b", "h"))
	mustAcquire(t, b, place("a b", "bad"))
	mustAcquire(t, b, place("a b", "old"))
	rdbOf(b).HSet(ctx, k.QueueInfo("a b"), "bad", "f 1 1 60000 5000 elsewhere 7 h")
	rdbOf(b).HSet(ctx, k.QueueInfo("a b"), "old", "f 1 1 60000 5000 "+k.Grants("a b", b.id)+" 7 h")
	release(t, b, place("a b", "h"), store.Freed)
	if n := nextNotice(t, g); n.Grantee != store.GranteeID("old") {
		t.Fatalf("grant %+v, want old's", n)
	}
	if rdbOf(b).HExists(ctx, k.QueueInfo("a b"), "bad").Val() {
		t.Fatal("the unreadable place is still there")
	}
}

// One lock's failure in a batch (here a key of the wrong type, changed by
// hand) fails that lock's step alone, as an unknown outcome: the other
// locks of the same script call, before and after it, are renewed or
// refreshed.
func TestBatchItemFailsAlone(t *testing.T) {
	b, _ := fairPair(t)
	ctx := t.Context()
	k := b.cfg.Keys
	plain := func(name string) store.Request {
		return store.Request{Name: name, Kind: store.Plain, Owner: "o", Hold: 1, Lease: time.Minute, Seq: 1}
	}
	permit := func(name string) store.Request {
		r := sem("o", 1, 1)
		r.Name = name
		return r
	}
	longer := func(r store.Request) store.Request { // renewed for two minutes
		r.Seq, r.Lease, r.Queue = 2, 2*time.Minute, 0
		return r
	}
	spoil := func(key string) { rdbOf(b).Del(ctx, key); rdbOf(b).SAdd(ctx, key, "x") }
	for _, c := range []struct {
		script   string
		take     func(name string)
		renewal  func(name string) store.Request
		spoil    func(name string)
		extended func(name string) time.Duration // what the renewal extended
	}{
		{"renew.lua",
			func(name string) { mustAcquire(t, b, plain(name)) },
			func(name string) store.Request { return longer(plain(name)) },
			func(name string) { spoil(k.Lock(name)) },
			func(name string) time.Duration { return rdbOf(b).PTTL(ctx, k.Lock(name)).Val() }},
		{"shared_renew.lua",
			func(name string) { mustAcquire(t, b, permit(name)) },
			func(name string) store.Request { return longer(permit(name)) },
			func(name string) { spoil(k.Holders(name)) },
			func(name string) time.Duration { return rdbOf(b).PTTL(ctx, k.Holders(name)).Val() }},
		{"refresh.lua",
			func(name string) {
				mustAcquire(t, b, place(name, "holder"))
				mustAcquire(t, b, place(name, "o"))
			},
			func(name string) store.Request {
				r := place(name, "o")
				r.Seq, r.Queue = 2, 2*time.Minute
				return r
			},
			func(name string) { spoil(k.QueueDeadlines(name)) },
			func(name string) time.Duration { return rdbOf(b).PTTL(ctx, k.QueueDeadlines(name)).Val() }},
	} {
		names := []string{c.script + " 1", c.script + " spoilt", c.script + " 2"}
		var reqs []store.Request
		for _, name := range names {
			c.take(name)
			reqs = append(reqs, c.renewal(name))
		}
		c.spoil(names[1])
		errs := renew(t, b, reqs)
		if err := errs[1]; !errors.Is(err, store.ErrBackend) || errors.Is(err, store.ErrNotHeld) || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("%s: the spoilt lock: %v, want an unknown outcome (ErrBackend) with Redis's error", c.script, err)
		}
		for _, i := range []int{0, 2} {
			if ttl := c.extended(names[i]); errs[i] != nil || ttl < 90*time.Second {
				t.Fatalf("%s: lock %q beside a spoilt one: %v, TTL %v; want renewed for 2m", c.script, names[i], errs[i], ttl)
			}
		}
	}
}
