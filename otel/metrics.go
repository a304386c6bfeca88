package otel

import (
	"context"

	"github.com/distlock/distlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// renewalBuckets bound the histogram of renewal round trips, in seconds:
// from a fast local Redis (well under a millisecond) to a store that is
// about to lose the lease.
var renewalBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// instruments are the Observer's metrics, made once by New.
type instruments struct {
	renewals        metric.Int64Counter     // distlock.renewals {kind, store, result}
	renewalDuration metric.Float64Histogram // distlock.renewal.duration {store}
	losses          metric.Int64Counter     // distlock.losses {kind, store, reason}
}

// newInstruments makes the instruments on m. An error (which an SDK
// reports with a usable instrument all the same) goes to OpenTelemetry's
// error handler.
func newInstruments(m metric.Meter) instruments {
	var ins instruments
	var err error
	ins.renewals, err = m.Int64Counter("distlock.renewals",
		metric.WithDescription("Renewals of leases by the watchdog, by result: ok (the lease was extended) or failed (it will be retried until the lease's deadline)."),
		metric.WithUnit("{renewal}"))
	handle(err)
	ins.renewalDuration, err = m.Float64Histogram("distlock.renewal.duration",
		metric.WithDescription("Round trip of a renewal, from its send to its answer or to giving up on it."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(renewalBuckets...))
	handle(err)
	ins.losses, err = m.Int64Counter("distlock.losses",
		metric.WithDescription("Locks lost while held, by reason: gone, revoked, renewal-failed, expired."),
		metric.WithUnit("{loss}"))
	handle(err)
	return ins
}

func handle(err error) {
	if err != nil {
		otel.Handle(err)
	}
}

// record counts ev in the metrics it belongs to, if any.
func (ins *instruments) record(ev distlock.Event) {
	ctx := context.Background()
	switch ev.Kind {
	case distlock.EventRenewed, distlock.EventRenewFailed:
		result := "ok"
		if ev.Kind == distlock.EventRenewFailed {
			result = "failed"
		}
		ins.renewals.Add(ctx, 1, metric.WithAttributes(
			kindKey.String(string(ev.Lock)), storeKey.String(ev.Store), resultKey.String(result)))
		ins.renewalDuration.Record(ctx, seconds(ev.Latency), metric.WithAttributes(storeKey.String(ev.Store)))
	case distlock.EventLost, distlock.EventExpired:
		ins.losses.Add(ctx, 1, metric.WithAttributes(
			kindKey.String(string(ev.Lock)), storeKey.String(ev.Store), reasonKey.String(string(ev.Reason))))
	}
}
