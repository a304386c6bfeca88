package redisstore_test

import (
	"context"
	"testing"

	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/store"
	"github.com/distlock/distlock/store/storetest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// go-redis logs every Sentinel switch; the suite's own lines matter.
	redis.SetLogger(discardLogs{})
	goleak.VerifyTestMain(m)
}

type discardLogs struct{}

func (discardLogs) Printf(context.Context, string, ...any) {}

// The conformance suite on each Redis topology the store serves, each on
// servers of its own.

func TestConformanceStandalone(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Run(t, func(t *testing.T) store.Store { return redisstore.New(srv.Client(t)) })
}

func TestConformanceSentinel(t *testing.T) {
	g := redistest.StartSentinel(t, 1)
	storetest.Run(t, func(t *testing.T) store.Store { return redisstore.New(g.FailoverClient(t)) })
}

func TestConformanceCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	storetest.Run(t, func(t *testing.T) store.Store { return redisstore.New(cl.Client(t)) })
}

func TestConformanceRedlock(t *testing.T) {
	var srvs []*redistest.Server
	for range 3 {
		srvs = append(srvs, redistest.Start(t))
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		var rdbs []redis.UniversalClient
		for _, srv := range srvs {
			rdbs = append(rdbs, srv.Client(t))
		}
		return redisstore.NewRedlock(rdbs)
	})
}
