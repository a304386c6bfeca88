package prometheus

import (
	"sync/atomic"

	"github.com/distlock/distlock"
	prom "github.com/prometheus/client_golang/prometheus"
)

// A series is the metrics of one kind of lock on one store, for one value
// of the label name: each is looked up in its vector at its first use and
// kept, so that the next events cost an atomic load and the metric's own
// atomic update, with no hashing of label values and no allocation.
type series struct {
	kind, store, name string // the values of its labels (name "" without WithLockNames)

	acquire  [nOutcomes]metric[prom.Observer]
	calls    [nOps][nOutcomes]metric[prom.Counter]
	hold     metric[prom.Observer]
	renewals [nResults]metric[prom.Counter]
	renewal  metric[prom.Observer]
	losses   [nReasons]metric[prom.Counter]
	held     metric[prom.Gauge]
	waiters  metric[prom.Gauge]
}

// A metric is a child of a vector, looked up once.
type metric[M any] struct{ p atomic.Pointer[M] }

// get returns the metric, which lookup finds the first time. Two
// goroutines may both look it up: a vector returns the same child for the
// same label values, so either may be kept.
func (m *metric[M]) get(lookup func() M) M {
	if p := m.p.Load(); p != nil {
		return *p
	}
	v := lookup()
	m.p.Store(&v)
	return v
}

// seriesOf returns the series of the lock name of kind on store, making it
// at its first use.
func (c *Collector) seriesOf(name string, kind distlock.Kind, store string) *series {
	n := 0
	if c.names != nil {
		var ok bool
		if n, ok = c.names[name]; !ok {
			n = len(c.names)
		}
	}
	k, s := kindIndex(kind), storeIndex(store)
	if k < 0 || s < 0 {
		return c.oddSeries(n, string(kind), store)
	}
	p := &c.table[(n*nKinds+k)*nStores+s]
	if ser := p.Load(); ser != nil {
		return ser
	}
	ser := &series{kind: kinds[k], store: stores[s], name: c.nameValues[n]}
	if !p.CompareAndSwap(nil, ser) {
		ser = p.Load()
	}
	return ser
}

// oddSeries returns the series of a kind or a store that the table has no
// place for (a store of another module that names itself): from a map,
// under a mutex, rather than lock-free.
func (c *Collector) oddSeries(n int, kind, store string) *series {
	key := seriesKey{n, kind, store}
	c.mu.Lock()
	defer c.mu.Unlock()
	ser := c.odd[key]
	if ser == nil {
		ser = &series{kind: kind, store: store, name: c.nameValues[n]}
		c.odd[key] = ser
	}
	return ser
}

// A seriesKey names a series outside the table.
type seriesKey struct {
	name        int
	kind, store string
}

// values returns the label values vals, with the series' name last when
// the metrics have the label name.
func (c *Collector) values(s *series, vals ...string) []string {
	if c.names != nil {
		vals = append(vals, s.name)
	}
	return vals
}

func (s *series) acquireHist(c *Collector, out int) prom.Observer {
	return s.acquire[out].get(func() prom.Observer {
		return c.acquire.WithLabelValues(c.values(s, s.kind, s.store, outcomes[out])...)
	})
}

func (s *series) callCounter(c *Collector, op, out int) prom.Counter {
	return s.calls[op][out].get(func() prom.Counter {
		return c.calls.WithLabelValues(c.values(s, ops[op], s.kind, s.store, outcomes[out])...)
	})
}

func (s *series) holdHist(c *Collector) prom.Observer {
	return s.hold.get(func() prom.Observer {
		return c.hold.WithLabelValues(c.values(s, s.kind, s.store)...)
	})
}

func (s *series) renewalCounter(c *Collector, result int) prom.Counter {
	return s.renewals[result].get(func() prom.Counter {
		return c.renewals.WithLabelValues(c.values(s, s.kind, s.store, results[result])...)
	})
}

func (s *series) renewalHist(c *Collector) prom.Observer {
	return s.renewal.get(func() prom.Observer {
		return c.renewal.WithLabelValues(c.values(s, s.store)...)
	})
}

func (s *series) lossCounter(c *Collector, reason int) prom.Counter {
	return s.losses[reason].get(func() prom.Counter {
		return c.losses.WithLabelValues(c.values(s, s.kind, s.store, reasons[reason])...)
	})
}

func (s *series) heldGauge(c *Collector) prom.Gauge {
	return s.held.get(func() prom.Gauge {
		return c.held.WithLabelValues(c.values(s, s.kind, s.store)...)
	})
}

func (s *series) waitersGauge(c *Collector) prom.Gauge {
	return s.waiters.get(func() prom.Gauge {
		return c.waiters.WithLabelValues(c.values(s, s.kind, s.store)...)
	})
}
