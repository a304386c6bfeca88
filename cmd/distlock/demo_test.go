//go:build unix

package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// TestDemo runs the demo under the lock, on the throwaway Redis it starts
// itself: it must sell exactly the stock, and show a stale token refused.
func TestDemo(t *testing.T) {
	t.Parallel()
	r := run(t, "demo", "--workers", "4", "--stock", "40")
	r.wantCode(t, 0)
	for _, want := range []string{"throwaway redis-server", "distlock: sold 40 of 40, oversold 0\n", "REFUSED"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output does not contain %q:\n%s", want, r.stdout)
		}
	}
	if r.stderr != "" {
		t.Errorf("demo stderr:\n%s", r.stderr)
	}
}

// TestDemoDeletesItsKeys runs the demo under the lock on a Redis given
// with --redis, with the default key prefix and with one that a glob
// pattern would misread: afterwards no key is left, neither the shop's
// nor any of its lock's (the lock, its fencing counter, abandonment
// marks).
func TestDemoDeletesItsKeys(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{redisstore.DefaultPrefix, `demo*?[x\]:`} {
		t.Run(prefix, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			r := run(t, "demo", "--redis", srv.URL(), "--prefix", prefix, "--workers", "4", "--stock", "40")
			r.wantCode(t, 0)
			if !strings.Contains(r.stdout, "distlock: sold 40 of 40, oversold 0\n") || !strings.Contains(r.stdout, "REFUSED") {
				t.Errorf("the demo did not run under the lock to its end:\n%s", r.stdout)
			}
			keys, err := srv.Client(t).Keys(context.Background(), "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 0 {
				t.Errorf("the demo left keys behind: %q", keys)
			}
		})
	}
}

// TestDemoUnsafe runs the demo without the lock, on a Redis given with
// --redis. Every item is sold at least once; overselling is likely but
// depends on the timing, so it is only logged. The demo's keys are gone
// afterwards.
func TestDemoUnsafe(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := run(t, "demo", "--redis", srv.URL(), "--unsafe", "--workers", "8", "--stock", "50", "--pause", "5ms")
	r.wantCode(t, 0)
	m := regexp.MustCompile(`(?m)^no lock: sold (\d+) of 50, (?:OVERSOLD|oversold) (\d+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no verdict in the demo output:\n%s", r.stdout)
	}
	sold, _ := strconv.Atoi(m[1])
	if sold < 50 {
		t.Errorf("sold %d of 50: every item must be sold", sold)
	}
	t.Logf("without the lock: sold %d of 50, oversold %s", sold, m[2])
	keys, err := srv.Client(t).Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("the demo left keys behind: %q", keys)
	}
}
