package distlock_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// validName is the documented rule for lock names, written independently
// of the library: non-empty, at most MaxNameLen bytes of UTF-8, without
// braces or control characters.
func validName(name string) bool {
	return name != "" && len(name) <= distlock.MaxNameLen && utf8.ValidString(name) &&
		!strings.ContainsAny(name, "{}") && !strings.ContainsFunc(name, unicode.IsControl)
}

func fuzzCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Any name is either refused with ErrInvalidName, without a round trip, or
// locks, shows up in Inspect and List, and unlocks leaving no lock behind.
// Never a panic, never another error.
func FuzzMutexName(f *testing.F) {
	for _, s := range []string{
		"", "a", "report", "a{b}", "}x", "{", "a\nb", "\x00", "a\x7f", "\u0085", "a\xffb", "\xc3",
		strings.Repeat("x", distlock.MaxNameLen), strings.Repeat("x", distlock.MaxNameLen+1),
		strings.Repeat("é", distlock.MaxNameLen/2), strings.Repeat("é", distlock.MaxNameLen/2) + "x",
		"name with spaces", "*?[]\\", "日本語", "\u2028", "\ufeff", "distlock:{x}", "x:fence", "x}:released", "%s%n", "'; DEL *",
	} {
		f.Add(s)
	}
	srv := redistest.Start(f)
	rdb := redis.NewClient(srv.Options())
	f.Cleanup(func() { rdb.Close() })
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	f.Cleanup(func() { c.Close() })

	f.Fuzz(func(t *testing.T, name string) {
		ctx := fuzzCtx(t)
		m := c.Mutex(name, distlock.WithTTL(10*time.Second))
		l, err := m.TryLock(ctx)
		if !validName(name) {
			if !errors.Is(err, distlock.ErrInvalidName) || l != nil {
				t.Fatalf("TryLock(%q) = %v, %v; want ErrInvalidName", name, l, err)
			}
			if _, err := m.Lock(ctx); !errors.Is(err, distlock.ErrInvalidName) {
				t.Fatalf("Lock(%q): %v", name, err)
			}
			if _, err := m.Inspect(ctx); !errors.Is(err, distlock.ErrInvalidName) {
				t.Fatalf("Inspect(%q): %v", name, err)
			}
			if _, err := m.ForceUnlock(ctx); !errors.Is(err, distlock.ErrInvalidName) {
				t.Fatalf("ForceUnlock(%q): %v", name, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("TryLock(%q): %v", name, err)
		}
		if l.Name() != name || l.Token() == 0 {
			t.Fatalf("lease %q token %d", l.Name(), l.Token())
		}
		info, err := m.Inspect(ctx)
		if err != nil || !info.Locked || info.Name != name || info.Token != l.Token() || info.Holds != 1 {
			t.Fatalf("Inspect(%q) = %+v, %v", name, info, err)
		}
		if n := rdb.Exists(ctx, "distlock:{"+name+"}").Val(); n != 1 {
			t.Fatalf("no lock hash for %q", name)
		}
		names, err := c.List(ctx, "*")
		if err != nil || !slices.Contains(names, name) {
			t.Fatalf("List = %q, %v; want it to contain %q", names, err, name)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q): %v", name, err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrNotHeld) {
			t.Fatalf("second Unlock(%q): %v, want ErrNotHeld", name, err)
		}
		if n := rdb.Exists(ctx, "distlock:{"+name+"}").Val(); n != 0 {
			t.Fatalf("lock hash of %q left after Unlock", name)
		}
	})
}

// validPrefix mirrors the documented prefix rule: like a name, but it may
// be empty.
func validPrefix(p string) bool { return p == "" || validName(p) }

// Any combination of lease, lease kind, fence retention, prefix and
// extension is refused with ErrInvalidOption (never a panic, never a round
// trip) or works: the lock is taken with a lease no longer than asked, an
// out-of-range Extend is refused and leaves the lease as it was, a valid
// one sets it, and Unlock leaves only the fencing counter, which expires.
func FuzzMutexOptions(f *testing.F) {
	sec, day := int64(time.Second), int64(24*time.Hour)
	for _, s := range []struct {
		ttl       int64
		fixed     bool
		retention int64
		prefix    string
		extend    int64
	}{
		{int64(distlock.DefaultTTL), false, int64(time.Hour), "distlock:", 2 * sec},
		{0, false, 0, "", 0},
		{-sec, true, -sec, "", -sec},
		{int64(distlock.MinTTL) - 1, false, sec, "p:", int64(distlock.MinTTL)},
		{int64(distlock.MinTTL), true, sec, "p:", int64(distlock.MaxTTL)},
		{int64(distlock.MaxTTL), false, 365 * day, "app/locks:", int64(distlock.MaxTTL) + 1},
		{int64(distlock.MaxTTL) + 1, true, 365*day + 1, "p", 0},
		{math.MaxInt64, false, math.MaxInt64, "p", math.MaxInt64},
		{math.MinInt64, true, math.MinInt64, "p", math.MinInt64},
		{sec, false, sec - 1, "p", sec},
		{sec, false, sec, "a{b", sec},
		{sec, false, sec, "x\x00", sec},
		{sec, true, sec, "\xff", sec},
		{sec, false, sec, strings.Repeat("p", distlock.MaxNameLen+1), sec},
		{sec, false, sec, "*?[", 3 * sec},
		{sec + 1, true, sec, "", int64(distlock.MinTTL) - 1},
	} {
		f.Add(s.ttl, s.fixed, s.retention, s.prefix, s.extend)
	}
	srv := redistest.Start(f)
	rdb := redis.NewClient(srv.Options())
	f.Cleanup(func() { rdb.Close() })

	inTTL := func(d int64) bool { return d >= int64(distlock.MinTTL) && d <= int64(distlock.MaxTTL) }
	f.Fuzz(func(t *testing.T, ttl int64, fixed bool, retention int64, prefix string, extend int64) {
		ctx := fuzzCtx(t)
		c := distlock.New(redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithFenceRetention(time.Duration(retention))), distlock.WithLogger(nil))
		defer c.Close()
		opt := distlock.WithTTL(time.Duration(ttl))
		if fixed {
			opt = distlock.WithFixedLease(time.Duration(ttl))
		}
		m := c.Mutex("fuzz", opt)
		valid := validPrefix(prefix) && retention >= sec && retention <= 365*day && inTTL(ttl)
		l, err := m.TryLock(ctx)
		if !valid {
			if !errors.Is(err, distlock.ErrInvalidOption) || l != nil {
				t.Fatalf("TryLock with ttl %d fixed %v retention %d prefix %q = %v, %v; want ErrInvalidOption", ttl, fixed, retention, prefix, l, err)
			}
			if _, err := c.List(ctx, "*"); !validPrefix(prefix) || retention < sec || retention > 365*day {
				if !errors.Is(err, distlock.ErrInvalidOption) {
					t.Fatalf("List with a bad client option: %v", err)
				}
			}
			if n := rdb.Exists(ctx, prefix+"{fuzz}", prefix+"{fuzz}:fence").Val(); n != 0 {
				t.Fatal("a refused lock wrote keys")
			}
			return
		}
		if err != nil {
			t.Fatalf("TryLock with ttl %v fixed %v retention %v prefix %q: %v", time.Duration(ttl), fixed, time.Duration(retention), prefix, err)
		}
		// A lease this short may end before the checks; it must then end
		// with ErrLockLost, not some other error.
		short := ttl < int64(time.Second)
		lost := func(err error) bool { return short && errors.Is(err, distlock.ErrLockLost) }
		key := prefix + "{fuzz}"
		if pttl := rdb.PTTL(ctx, key).Val(); pttl > time.Duration(ttl) || (pttl <= 0 && !short) {
			t.Fatalf("PTTL %v for a lease of %v", pttl, time.Duration(ttl))
		}
		err = l.Extend(ctx, time.Duration(extend))
		switch {
		case !inTTL(extend):
			if !errors.Is(err, distlock.ErrInvalidOption) {
				t.Fatalf("Extend(%v) = %v, want ErrInvalidOption", time.Duration(extend), err)
			}
			if pttl := rdb.PTTL(ctx, key).Val(); pttl > time.Duration(ttl) {
				t.Fatalf("a refused Extend(%v) changed the lease: PTTL %v > %v", time.Duration(extend), pttl, time.Duration(ttl))
			}
		case err == nil:
			if pttl := rdb.PTTL(ctx, key).Val(); pttl > time.Duration(extend) || (pttl <= 0 && extend >= int64(time.Second)) {
				t.Fatalf("PTTL %v after Extend(%v)", pttl, time.Duration(extend))
			}
		case !lost(err) && !(extend < int64(time.Second) && errors.Is(err, distlock.ErrLockLost)):
			t.Fatalf("Extend(%v): %v", time.Duration(extend), err)
		}
		if err := l.Unlock(ctx); err != nil && !errors.Is(err, distlock.ErrLockLost) {
			t.Fatalf("Unlock: %v", err)
		}
		if n := rdb.Exists(ctx, key).Val(); n != 0 {
			t.Fatal("lock hash left after Unlock")
		}
		if pttl := rdb.PTTL(ctx, key+":fence").Val(); pttl <= 0 || pttl > time.Duration(retention) {
			t.Fatalf("fence counter PTTL %v, want within (0, %v]", pttl, time.Duration(retention))
		}
		rdb.Del(ctx, key+":fence")
	})
}

// List accepts any pattern: it returns names of held locks that match, or
// an error, never a panic.
func FuzzListPattern(f *testing.F) {
	for _, s := range []string{"*", "", "a*", "[", "\\", "}{", "*}:fence", "a[b-", "?", "\x00", "**{*"} {
		f.Add(s)
	}
	srv := redistest.Start(f)
	rdb := redis.NewClient(srv.Options())
	f.Cleanup(func() { rdb.Close() })
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	f.Cleanup(func() { c.Close() })
	ctx := context.Background()
	held, err := c.Mutex("held-for-list").Lock(ctx)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { held.Unlock(context.Background()) })
	rdb.Set(ctx, "distlock:{held-for-list}:fence:x}", "not a lock", 0) // a stray key under the prefix

	f.Fuzz(func(t *testing.T, pattern string) {
		names, err := c.List(fuzzCtx(t), pattern)
		if err != nil {
			if !errors.Is(err, distlock.ErrBackend) {
				t.Fatalf("List(%q): %v", pattern, err)
			}
			return
		}
		for _, n := range names {
			if n != "held-for-list" && !strings.Contains(n, "}") {
				t.Fatalf("List(%q) returned %q, which is not a held lock", pattern, n)
			}
		}
		if pattern == "*" || pattern == "" {
			if !slices.Contains(names, "held-for-list") {
				t.Fatalf("List(%q) = %q", pattern, names)
			}
		}
	})
}
