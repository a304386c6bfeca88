// Package otel records what the locks of a distlock Client do as
// OpenTelemetry spans and metrics. Its Observer is a distlock.Observer;
// import the package under a name of its own, such as distlockotel, next
// to go.opentelemetry.io/otel:
//
//	obs := distlockotel.New() // the global providers; or WithTracerProvider, WithMeterProvider
//	locks := distlock.New(store, distlock.WithObserver(obs))
//	lease, err := locks.Mutex("orders:42").Lock(ctx) // a span distlock.lock, child of ctx's
//
// # Spans
//
// Each call of the API is a span named "distlock." and the call's op, a
// child of the span in the context passed to the call: distlock.lock,
// distlock.try-lock, distlock.rlock, distlock.try-rlock, distlock.acquire,
// distlock.try-acquire, distlock.campaign (the acquisitions);
// distlock.unlock, distlock.extend; distlock.once, distlock.once-per (the
// whole helper, job included: its own acquisition is a child span
// distlock.lock or distlock.try-lock). The call goes on with the context
// holding its span, so the store client's own spans (go-redis's or pgx's
// tracing, say) are its children, and so are the spans of work done under
// the lease's context, which carries the acquisition's values. Its
// attributes:
//
//	distlock.lock.kind  mutex, fair-mutex, rwmutex, semaphore, election
//	distlock.store      redis, redlock, etcd, postgresql, mysql, other
//	db.system.name      redis (for redis and redlock), postgresql, mysql; absent for the others
//	distlock.lock.name  the lock's name (a MultiMutex's: its members', sorted, joined with "+")
//	distlock.outcome    ok, busy, timeout, canceled, error
//	distlock.wait       an acquisition's wait, in seconds, whatever its outcome
//	distlock.token      the fencing token, of an acquisition that succeeded
//	distlock.hold       the hold's id (unique in the process): an acquisition's, an Unlock's, an Extend's
//
// An outcome of error, timeout or canceled gives the span the status
// Error and records the error as an exception event; busy (a TryLock that
// found the lock taken) is a normal answer, marked by distlock.outcome
// only. The span of an Unlock or Extend is linked to its lease's span.
//
// An acquisition that takes a new hold starts a span distlock.lease, a
// child of the acquisition's span (if that one is recorded: a lease span
// is sampled as its parent is), from the moment it returns to the end of
// the hold: its release, its loss, the expiry of a fixed lease, or the
// Client's Close. Re-entering the hold starts no second lease span. The
// lease span has the lock's attributes, distlock.token and distlock.hold,
// and distlock.held (how long the hold lasted, in seconds) at its end. A
// loss is an event distlock.lost, with distlock.reason (gone, revoked,
// renewal-failed) and exception.message (the error), and makes
// the status Error. The expiry of a fixed lease (distlock.expired) and
// the Client's Close (distlock.closed) are events, not errors. A failed
// renewal is an event distlock.renew-failed of the lease span; renewals
// are otherwise counted, not traced. A MultiMutex's members, held as one
// Lease, have no lease span: the call's span is the trace of them.
//
// No attribute or event carries an owner id, secret or public.
//
// # Metrics
//
//	distlock.renewals          counter, {renewal}: renewals of leases by the watchdog,
//	                           by distlock.lock.kind, distlock.store and distlock.result
//	                           (ok: the lease was extended; failed: it is retried until the lease's deadline)
//	distlock.renewal.duration  histogram, s: a renewal's round trip, from its send to its answer
//	                           or to giving up on it, by distlock.store
//	distlock.losses            counter, {loss}: holds ended before their Unlock, by distlock.lock.kind,
//	                           distlock.store and distlock.reason (gone, revoked, renewal-failed;
//	                           expired: a fixed lease ran its course)
//
// The instruments are made once, by New. For latencies and counts of the
// calls themselves, use the spans (or a span-metrics connector), or the
// module github.com/distlock/distlock/prometheus.
package otel
