package prometheus

import (
	"fmt"
	"math"
	"slices"
)

// An Option configures a Collector.
type Option func(*config)

type config struct {
	namespace string
	names     []string  // WithLockNames's
	named     bool      // WithLockNames was given: the label name is added
	all       []float64 // WithBuckets's, for the histograms given none of their own
	wait      []float64
	hold      []float64
	renewal   []float64
}

// The default buckets of the histograms, in seconds.
var (
	// acquire_duration_seconds: from an uncontended acquisition (a round
	// trip, half a millisecond on a LAN) to a minute's wait.
	defaultWaitBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// hold_duration_seconds: from a millisecond's critical section to an
	// hour's job.
	defaultHoldBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600}
	// renewal_duration_seconds: a round trip, to 10 s (a renewal that
	// fails may be given up on only at the lease's deadline).
	defaultRenewalBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// WithNamespace sets the prefix of the metrics' names (default
// "distlock": distlock_calls_total). An empty namespace leaves the names
// unprefixed; one that makes invalid names makes the registration of the
// Collector fail. The dashboard (Dashboard) assumes the default.
func WithNamespace(ns string) Option {
	return func(c *config) { c.namespace = ns }
}

// WithLockNames adds the label name, last, to every metric: the lock's
// name if it is one of names, "other" if not. Lock names are unbounded
// (a name per order, per user): only a fixed set of them may be labels.
// A MultiMutex's calls and waits are named by its members' names, sorted
// and joined with "+" ("a+b"), and its holds by each member's name.
// Without this option, metrics have no label name; with several, the last
// counts.
func WithLockNames(names ...string) Option {
	return func(c *config) {
		c.names = append(c.names[:0:0], names...)
		c.named = true
	}
}

// WithBuckets sets the buckets of every histogram, in seconds, but those
// that WithWaitBuckets, WithHoldBuckets or WithRenewalBuckets set,
// whatever the order of the options. Buckets must increase strictly: New
// panics if they do not. No buckets (an empty list) means the default.
func WithBuckets(b ...float64) Option {
	return func(c *config) { c.all = b }
}

// WithWaitBuckets sets the buckets of acquire_duration_seconds, in
// seconds. The default goes from 0.5 ms (an acquisition that did not wait:
// one round trip) to 60 s: 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
// 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60.
func WithWaitBuckets(b ...float64) Option {
	return func(c *config) { c.wait = b }
}

// WithHoldBuckets sets the buckets of hold_duration_seconds, in seconds.
// The default goes from 1 ms to an hour: 0.001, 0.005, 0.01, 0.05, 0.1,
// 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600.
func WithHoldBuckets(b ...float64) Option {
	return func(c *config) { c.hold = b }
}

// WithRenewalBuckets sets the buckets of renewal_duration_seconds, in
// seconds. The default goes from 0.5 ms to 10 s: 0.0005, 0.001, 0.0025, 0.005,
// 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10.
func WithRenewalBuckets(b ...float64) Option {
	return func(c *config) { c.renewal = b }
}

// newConfig applies opts to the defaults and checks the buckets.
func newConfig(opts []Option) config {
	c := config{namespace: "distlock"}
	for _, o := range opts {
		o(&c)
	}
	c.wait = buckets("wait", c.wait, c.all, defaultWaitBuckets)
	c.hold = buckets("hold", c.hold, c.all, defaultHoldBuckets)
	c.renewal = buckets("renewal", c.renewal, c.all, defaultRenewalBuckets)
	return c
}

// buckets is the first of own, all and def that is not empty, a copy of
// it. It panics if those buckets do not increase strictly: a histogram
// would panic on its first observation, on a goroutine of the lock engine.
func buckets(what string, own, all, def []float64) []float64 {
	b := own
	if len(b) == 0 {
		b = all
	}
	if len(b) == 0 {
		b = def
	}
	for i, v := range b {
		if math.IsNaN(v) || i > 0 && v <= b[i-1] {
			panic(fmt.Sprintf("distlock/prometheus: %s buckets %v do not increase strictly", what, b))
		}
	}
	return slices.Clone(b)
}
