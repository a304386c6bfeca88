package prometheus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"

	"github.com/distlock/distlock"
	distlockprom "github.com/distlock/distlock/prometheus"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// exampleRedis starts a throwaway redis-server for the examples; in your
// code, rdb is your own go-redis client.
func exampleRedis() (*redis.Client, func()) {
	srv, err := redistest.NewServer()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(srv.Options())
	return rdb, func() { rdb.Close(); srv.Stop() }
}

// The wiring takes three lines: make the Collector, register it, and
// observe the Client with it. Serve the registry as usual, with
// promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) (or register with
// prometheus.DefaultRegisterer, served by promhttp.Handler()).
func Example() {
	rdb, done := exampleRedis()
	defer done()
	reg := prometheus.NewRegistry()

	col := distlockprom.New()
	reg.MustRegister(col)
	locks := distlock.New(redisstore.New(rdb), distlock.WithObserver(col))
	defer locks.Close()

	ctx := context.Background()
	lease, err := locks.Mutex("nightly-report").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	fams, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range fams {
		fmt.Println(f.GetName())
	}
	// Output:
	// distlock_acquire_duration_seconds
	// distlock_calls_total
	// distlock_held_locks
	// distlock_hold_duration_seconds
}

// Label the metrics of a few locks by name; the others are "other".
func ExampleWithLockNames() {
	col := distlockprom.New(distlockprom.WithLockNames("billing:run", "reports:nightly"))
	prometheus.NewRegistry().MustRegister(col)
}

// Serve the Grafana dashboard next to the metrics, for an operator to
// import.
func ExampleDashboard() {
	mux := http.NewServeMux() // or http.DefaultServeMux, next to promhttp.Handler()
	mux.HandleFunc("/dashboard.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(distlockprom.Dashboard())
	})

	var d struct{ Title string }
	if err := json.Unmarshal(distlockprom.Dashboard(), &d); err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Title)
	// Output: distlock
}
