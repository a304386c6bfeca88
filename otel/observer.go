package otel

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of the tracer and the meter.
const scope = "github.com/distlock/distlock/otel"

// An Observer is a distlock.Observer that records what a Client's locks
// do as OpenTelemetry spans and metrics (see the package documentation
// for each). Install it with distlock.WithObserver. Its methods are safe
// for concurrent use, never block on anything but a short mutex, and never
// call the Client.
//
// One Observer may serve several Clients: it tells holds apart by their
// ids, which are unique in the process. Observers on the same
// MeterProvider share its instruments, so their counts add up.
type Observer struct {
	tracer trace.Tracer
	ins    instruments
	leases leases
}

var _ distlock.Observer = (*Observer)(nil)

// New returns an Observer on the providers that opts name, by default the
// global ones as they are when New is called (otel.GetTracerProvider(),
// otel.GetMeterProvider(); global providers set later are used too, since
// OpenTelemetry's defaults delegate to them). It makes the instruments
// once, here.
func New(opts ...Option) *Observer {
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	if c.tracers == nil {
		c.tracers = otel.GetTracerProvider()
	}
	if c.meters == nil {
		c.meters = otel.GetMeterProvider()
	}
	return &Observer{
		tracer: c.tracers.Tracer(scope),
		ins:    newInstruments(c.meters.Meter(scope)),
		leases: leases{m: make(map[leaseKey]lease)},
	}
}

// StartCall starts the span of call c, named "distlock.<op>" (see
// spanName), as a child of the span in ctx, and returns ctx holding it.
// The span starts with the lock's attributes, for samplers to see. The
// span of an Unlock or Extend is linked to its lease's span.
func (o *Observer) StartCall(ctx context.Context, c distlock.Call) context.Context {
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = appendLock(attrs, c.Lock, c.Store, c.Name)
	if c.Hold == 0 {
		ctx, _ = o.tracer.Start(ctx, spanName(c.Op), trace.WithAttributes(attrs...))
		return ctx
	}
	attrs = append(attrs, holdKey.Int64(id(c.Hold)))
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...)}
	if span := o.leases.span(leaseKey{c.Store, c.Name, c.Hold}); span != nil {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: span.SpanContext()}))
	}
	ctx, _ = o.tracer.Start(ctx, spanName(c.Op), opts...)
	return ctx
}

// EndCall ends the span of call c that StartCall put in ctx, with the
// outcome r. An outcome of error, timeout or canceled marks the span as
// failed and records r.Err; busy (a try that found the lock taken) does
// not. An acquisition that took a new hold starts the hold's lease span,
// a child of the call's, if the call's span is recorded (a lease span
// would be sampled as its parent is, and be an orphan otherwise).
func (o *Observer) EndCall(ctx context.Context, c distlock.Call, r distlock.CallResult) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		span.End()
		return
	}
	acquired := c.Acquires() && r.Outcome == distlock.OutcomeOK
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, outcomeKey.String(string(r.Outcome)))
	if c.Acquires() {
		attrs = append(attrs, waitKey.Float64(seconds(r.Duration)))
	}
	if acquired {
		attrs = append(attrs, tokenKey.Int64(id(r.Token)))
		if r.Hold != 0 {
			attrs = append(attrs, holdKey.Int64(id(r.Hold)))
		}
	}
	span.SetAttributes(attrs...)
	switch r.Outcome {
	case distlock.OutcomeError, distlock.OutcomeTimeout, distlock.OutcomeCanceled:
		desc := string(r.Outcome)
		if r.Err != nil {
			span.RecordError(r.Err)
			desc = r.Err.Error()
		}
		span.SetStatus(codes.Error, desc)
	}
	now := time.Now()
	if acquired && r.Hold != 0 {
		o.startLease(ctx, c, r, now)
	}
	span.End(trace.WithTimestamp(now))
}

// Event counts ev in the metrics, and starts nothing: it ends the lease
// span of the hold that an EventEnded ends (an unknown hold is ignored),
// and adds an event to it for a failed renewal.
func (o *Observer) Event(ev distlock.Event) {
	o.ins.record(ev)
	k := leaseKey{ev.Store, ev.Name, ev.Hold}
	switch ev.Kind {
	case distlock.EventAcquired:
		if ev.Holds == 1 && ev.Hold != 0 {
			o.leases.acquired(k)
		}
	case distlock.EventEnded:
		if span := o.leases.end(k, ev); span != nil {
			endLease(span, ev)
		}
	case distlock.EventRenewFailed:
		if span := o.leases.span(k); span != nil {
			span.AddEvent("distlock.renew-failed", trace.WithAttributes(messageKey.String(errText(ev.Err))))
		}
	}
}

// startLease starts the lease span of the hold that the acquisition c
// took, at the instant at, unless the hold has ended already or has its
// span (a re-entry).
func (o *Observer) startLease(ctx context.Context, c distlock.Call, r distlock.CallResult, at time.Time) {
	k := leaseKey{c.Store, c.Name, r.Hold}
	if !o.leases.claim(k) {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = appendLock(attrs, c.Lock, c.Store, c.Name)
	attrs = append(attrs, tokenKey.Int64(id(r.Token)), holdKey.Int64(id(r.Hold)))
	_, span := o.tracer.Start(ctx, "distlock.lease", trace.WithTimestamp(at), trace.WithAttributes(attrs...))
	if ev, ended := o.leases.started(k, span); ended {
		endLease(span, ev)
	}
}

// endLease ends the lease span of the hold that ev, its EventEnded, ends.
// A loss is an event distlock.lost and an error; the expiry of a fixed
// lease and the Client's Close are events, not errors.
func endLease(span trace.Span, ev distlock.Event) {
	span.SetAttributes(heldKey.Float64(seconds(ev.Held)))
	switch {
	case ev.Err == nil: // released
	case errors.Is(ev.Err, distlock.ErrLeaseExpired):
		span.AddEvent("distlock.expired", trace.WithAttributes(messageKey.String(ev.Err.Error())))
	case ev.Reason != "":
		span.AddEvent("distlock.lost", trace.WithAttributes(
			reasonKey.String(string(ev.Reason)), messageKey.String(ev.Err.Error())))
		span.SetStatus(codes.Error, ev.Err.Error())
	case errors.Is(ev.Err, distlock.ErrClosed):
		span.AddEvent("distlock.closed", trace.WithAttributes(messageKey.String(ev.Err.Error())))
	default:
		span.AddEvent("distlock.ended", trace.WithAttributes(messageKey.String(ev.Err.Error())))
		span.SetStatus(codes.Error, ev.Err.Error())
	}
	span.End()
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// spanName is the name of the span of a call of op: "distlock." and op.
// The names of the ops distlock has are constants, made without
// allocating.
func spanName(op string) string {
	switch op {
	case "lock":
		return "distlock.lock"
	case "try-lock":
		return "distlock.try-lock"
	case "rlock":
		return "distlock.rlock"
	case "try-rlock":
		return "distlock.try-rlock"
	case "acquire":
		return "distlock.acquire"
	case "try-acquire":
		return "distlock.try-acquire"
	case "campaign":
		return "distlock.campaign"
	case "unlock":
		return "distlock.unlock"
	case "extend":
		return "distlock.extend"
	case "once":
		return "distlock.once"
	case "once-per":
		return "distlock.once-per"
	}
	return "distlock." + op
}
