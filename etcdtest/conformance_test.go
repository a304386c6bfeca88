package etcdtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"

	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/store"
	"github.com/distlock/distlock/store/storetest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
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

// TestConformanceNamespaced: the suite on clients whose KV, Watcher and
// Lease are etcd's namespace wrappers, as an application that shares a
// cluster sets them. The store sends its commonest requests on the
// client's gRPC stub only while the client's KV is etcd's own; here they
// must go through the namespace, like every other request. The keys of a
// held lock are then under the namespace, and nowhere else.
func TestConformanceNamespaced(t *testing.T) {
	c := etcdtest.Start(t, 1)
	const ns = "tenant/"
	namespaced := func(t *testing.T) *clientv3.Client {
		cli := c.Client(t)
		cli.KV = namespace.NewKV(cli.KV, ns)
		cli.Watcher = namespace.NewWatcher(cli.Watcher, ns)
		cli.Lease = namespace.NewLease(cli.Lease, ns)
		return cli
	}
	storetest.Run(t, func(t *testing.T) store.Store { return etcdstore.New(namespaced(t)) })

	lc := distlock.New(etcdstore.New(namespaced(t)), distlock.WithLogger(nil))
	t.Cleanup(func() { lc.Close() })
	l, err := lc.Mutex("held").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Client(t).Get(t.Context(), "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, kv := range resp.Kvs {
		switch k := string(kv.Key); {
		case !strings.HasPrefix(k, ns):
			t.Errorf("key %q outside the namespace", k)
		case strings.HasPrefix(k, ns+etcdstore.DefaultPrefix+"lock/{held}/"):
			held++
		}
	}
	if held != 1 {
		t.Errorf("%d keys of the held lock under the namespace, want 1", held)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
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
