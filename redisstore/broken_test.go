package redisstore_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/store"
	"github.com/distlock/distlock/store/storetest"
)

// The conformance suite must fail a store that breaks what it checks.
// Each broken store below is the Redis store with one fault; the suite
// runs on it in a child process (a failing subtest cannot be caught in
// this one), and the check named must fail there, with its message.
var brokenStores = map[string]struct {
	wrap  func(store.Store) store.Store
	check string // the subtest of storetest.Run that must fail
	says  string // in its output
}{
	// Abandon does nothing: a late acquisition takes the lock.
	"NoAbandon": {func(s store.Store) store.Store { return noAbandon{s} },
		"Mutex/LateAcquisitionIsHarmless", "after its owner was given up was applied"},
	// Watch delivers nothing: a waiter learns of a release at the
	// holder's lease only.
	"NoNotices": {func(s store.Store) store.Store { return noNotices{s} },
		"Mutex/WakeOnRelease", "unlocked 10 s before its lease of a minute ends"},
	// Renew says it renewed, and renews nothing: the lock expires while
	// its holder's lease context lives on.
	"FalseRenewals": {func(s store.Store) store.Store { return falseRenewals{s} },
		"Mutex/RenewalKeepsTheLock", "another client took the lock"},
	// Every grant has token 1: tokens do not increase.
	"NoCounter": {func(s store.Store) store.Store { return noCounter{s} },
		"Mutex/TokensIncrease", "not above"},
}

type noAbandon struct{ store.Store }

func (noAbandon) Abandon(context.Context, store.Request) (bool, error) { return false, nil }

type noNotices struct{ store.Store }

func (noNotices) Watch(context.Context, string, store.Kind, func(store.Notice)) (func(), error) {
	return func() {}, nil
}

type falseRenewals struct{ store.Store }

func (falseRenewals) Renew(_ context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	for i, r := range rs {
		report(i, store.Grant{Acquired: r.Queue > 0}, nil)
	}
}

type noCounter struct{ store.Store }

func (s noCounter) Acquire(ctx context.Context, r store.Request) (store.Grant, error) {
	g, err := s.Store.Acquire(ctx, r)
	if g.Acquired {
		g.Token = 1
	}
	return g, err
}

const brokenEnv = "DISTLOCK_BROKEN_STORE"

// TestBrokenStore runs the suite on the broken store that brokenEnv
// names; without it, it does nothing.
func TestBrokenStore(t *testing.T) {
	b, ok := brokenStores[os.Getenv(brokenEnv)]
	if !ok {
		t.Skip("run by TestConformanceCatchesBrokenStores")
	}
	srv := redistest.Start(t)
	storetest.Run(t, func(t *testing.T) store.Store { return b.wrap(redisstore.New(srv.Client(t))) })
}

func TestConformanceCatchesBrokenStores(t *testing.T) {
	for name, b := range brokenStores {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStore$/^"+strings.ReplaceAll(b.check, "/", "$/^")+"$", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store broken by %s:\n%s", name, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenStore/"+b.check) || !strings.Contains(string(out), b.says) {
				t.Fatalf("the suite did not fail %s saying %q:\n%s", b.check, b.says, out)
			}
		})
	}
}
