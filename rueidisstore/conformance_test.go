package rueidisstore_test

import (
	"testing"

	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/rueidisstore"
	"github.com/distlock/distlock/store"
	"github.com/distlock/distlock/store/storetest"
	"github.com/redis/rueidis"
	"go.uber.org/goleak"
)

// rueidis leaves a Cluster client's refresh asleep for a while after Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"))
}

// newClient returns a rueidis client of opt, closed when t ends.
func newClient(t *testing.T, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("rueidis: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// The conformance suite on each Redis topology the store serves, each on
// servers of its own.

func TestConformanceStandalone(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return rueidisstore.New(newClient(t, rueidis.ClientOption{InitAddress: []string{srv.Addr()}}))
	})
}

func TestConformanceSentinel(t *testing.T) {
	g := redistest.StartSentinel(t, 1)
	storetest.Run(t, func(t *testing.T) store.Store {
		return rueidisstore.New(newClient(t, rueidis.ClientOption{InitAddress: g.SentinelAddrs(),
			Sentinel: rueidis.SentinelOption{MasterSet: g.MasterName()}}))
	})
}

func TestConformanceCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	storetest.Run(t, func(t *testing.T) store.Store {
		return rueidisstore.New(newClient(t, rueidis.ClientOption{InitAddress: cl.Addrs()}))
	})
}

func TestConformanceRedlock(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, redistest.Start(t).Addr())
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		var clients []rueidis.Client
		for _, addr := range addrs {
			clients = append(clients, newClient(t, rueidis.ClientOption{InitAddress: []string{addr}}))
		}
		return rueidisstore.NewRedlock(clients)
	})
}
