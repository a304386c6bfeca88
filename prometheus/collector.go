package prometheus

import (
	"sync"
	"sync/atomic"

	"github.com/distlock/distlock"
	prom "github.com/prometheus/client_golang/prometheus"
)

// A Collector is the metrics of the locks of the Clients it observes. It
// is a prometheus.Collector, to register with a registry, and a
// distlock.Observer, to install with distlock.WithObserver; one may
// observe several Clients. Make one with New; it is safe for concurrent
// use.
type Collector struct {
	names      map[string]int // index of each name given to WithLockNames; nil without
	nameValues []string       // the label name's value of each index: the names, then "other"

	acquire  *prom.HistogramVec
	calls    *prom.CounterVec
	hold     *prom.HistogramVec
	renewals *prom.CounterVec
	renewal  *prom.HistogramVec
	losses   *prom.CounterVec
	held     *prom.GaugeVec
	waiters  *prom.GaugeVec

	table []atomic.Pointer[series] // by name, kind and store: see seriesOf

	mu  sync.Mutex
	odd map[seriesKey]*series // the series outside the table
}

var (
	_ prom.Collector    = (*Collector)(nil)
	_ distlock.Observer = (*Collector)(nil)
)

// New returns a Collector with the metrics described in the package
// documentation. It registers nothing: register it with a registry
// yourself. It panics if the buckets of a histogram do not increase
// strictly.
func New(opts ...Option) *Collector {
	cfg := newConfig(opts)
	c := &Collector{nameValues: []string{""}, odd: make(map[seriesKey]*series)}
	var name []string
	if cfg.named {
		c.names = make(map[string]int, len(cfg.names))
		c.nameValues = c.nameValues[:0]
		for _, n := range cfg.names {
			if _, dup := c.names[n]; !dup {
				c.names[n] = len(c.nameValues)
				c.nameValues = append(c.nameValues, n)
			}
		}
		c.nameValues = append(c.nameValues, otherName)
		name = []string{"name"}
	}
	c.table = make([]atomic.Pointer[series], len(c.nameValues)*nKinds*nStores)

	labels := func(l ...string) []string { return append(l, name...) }
	ns := cfg.namespace
	c.acquire = prom.NewHistogramVec(prom.HistogramOpts{
		Namespace: ns, Name: "acquire_duration_seconds",
		Help:    "How long acquisitions (Lock, TryLock, RLock, TryRLock, Acquire, TryAcquire, Campaign) took, waits included, by how they ended.",
		Buckets: cfg.wait,
	}, labels("kind", "store", "outcome"))
	c.calls = prom.NewCounterVec(prom.CounterOpts{
		Namespace: ns, Name: "calls_total",
		Help: "Calls of the lock API (acquisitions, unlock, extend, once, once-per), by how they ended.",
	}, labels("op", "kind", "store", "outcome"))
	c.hold = prom.NewHistogramVec(prom.HistogramOpts{
		Namespace: ns, Name: "hold_duration_seconds",
		Help:    "How long locks were held, from acquisition to release or loss.",
		Buckets: cfg.hold,
	}, labels("kind", "store"))
	c.renewals = prom.NewCounterVec(prom.CounterOpts{
		Namespace: ns, Name: "renewals_total",
		Help: "Lease renewals by the watchdog, by result: ok, or failed (retried until the lease's deadline).",
	}, labels("kind", "store", "result"))
	c.renewal = prom.NewHistogramVec(prom.HistogramOpts{
		Namespace: ns, Name: "renewal_duration_seconds",
		Help:    "How long lease renewals took, from the request to the answer, or to the give-up of a failed one.",
		Buckets: cfg.renewal,
	}, labels("store"))
	c.losses = prom.NewCounterVec(prom.CounterOpts{
		Namespace: ns, Name: "losses_total",
		Help: "Locks lost while held, by reason: gone, revoked, renewal-failed, expired.",
	}, labels("kind", "store", "reason"))
	c.held = prom.NewGaugeVec(prom.GaugeOpts{
		Namespace: ns, Name: "held_locks",
		Help: "Locks held now by this process (a re-entered lock counts once).",
	}, labels("kind", "store"))
	c.waiters = prom.NewGaugeVec(prom.GaugeOpts{
		Namespace: ns, Name: "waiters",
		Help: "Acquisitions of this process waiting now for a lock held by another owner.",
	}, labels("kind", "store"))
	return c
}

// vectors returns the Collector's metrics, in the order of the package
// documentation.
func (c *Collector) vectors() []prom.Collector {
	return []prom.Collector{c.acquire, c.calls, c.hold, c.renewals, c.renewal, c.losses, c.held, c.waiters}
}

// Describe sends the descriptions of the eight metrics to ch.
func (c *Collector) Describe(ch chan<- *prom.Desc) {
	for _, v := range c.vectors() {
		v.Describe(ch)
	}
}

// Collect sends the metrics' current values to ch. Series appear as their
// first event comes: a counter that is 0 because nothing happened is not
// sent.
func (c *Collector) Collect(ch chan<- prom.Metric) {
	for _, v := range c.vectors() {
		v.Collect(ch)
	}
}
