package etcdtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"

	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/store"
	"github.com/distlock/distlock/store/storetest"
)

// The store conformance suite on etcdstore, on one member and on three
// (each client on its own member, so that requests cross the cluster).

func TestConformanceOneMember(t *testing.T) {
	c := etcdtest.Start(t, 1)
	storetest.Run(t, func(t *testing.T) store.Store { return etcdstore.New(c.Client(t)) })
}

func TestConformanceThreeMembers(t *testing.T) {
	c := etcdtest.Start(t, 3)
	next := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		m := c.Members()[next%3]
		next++
		return etcdstore.New(m.Client(t))
	})
}

// TestEtcdOncePerUnsupported: OncePer counts periods by the store's clock,
// which etcd does not have: it fails with ErrUnsupported, and runs
// nothing, while Once (the conformance suite's check) is served.
func TestEtcdOncePerUnsupported(t *testing.T) {
	c := etcdtest.Start(t, 1)
	lc := distlock.New(etcdstore.New(c.Client(t)), distlock.WithLogger(nil))
	t.Cleanup(func() { lc.Close() })
	ran := false
	_, err := lc.OncePer(t.Context(), "nightly", time.Hour, func(context.Context, uint64) error { ran = true; return nil })
	if !errors.Is(err, distlock.ErrUnsupported) || ran {
		t.Fatalf("OncePer on etcd: %v, ran %v; want ErrUnsupported, not run", err, ran)
	}
}
