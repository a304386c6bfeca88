package otel

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// An Option configures an Observer.
type Option func(*config)

type config struct {
	tracers trace.TracerProvider
	meters  metric.MeterProvider
}

// WithTracerProvider sets where the Observer's spans go. The default is
// the global provider as New finds it (otel.GetTracerProvider()); a nil
// provider keeps the default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tracers = tp
		}
	}
}

// WithMeterProvider sets where the Observer's metrics go. The default is
// the global provider as New finds it (otel.GetMeterProvider()); a nil
// provider keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.meters = mp
		}
	}
}
