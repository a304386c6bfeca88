// Package prometheus exports the metrics of distlock's locks to
// Prometheus. Its Collector is a prometheus.Collector and a
// distlock.Observer; the wiring takes three lines (the package is named
// prometheus, as its path says: import it under another name, such as
// distlockprom):
//
//	col := distlockprom.New()
//	prometheus.MustRegister(col) // or your own registry: nothing registers itself
//	locks := distlock.New(redisstore.New(rdb), distlock.WithObserver(col))
//
// One Collector may observe several Clients, on any store.
//
// # Metrics
//
// With the default namespace, "distlock" (see WithNamespace):
//
//	distlock_acquire_duration_seconds  histogram {kind, store, outcome}
//	distlock_calls_total               counter   {op, kind, store, outcome}
//	distlock_hold_duration_seconds     histogram {kind, store}
//	distlock_renewals_total            counter   {kind, store, result}
//	distlock_renewal_duration_seconds  histogram {store}
//	distlock_losses_total              counter   {kind, store, reason}
//	distlock_held_locks                gauge     {kind, store}
//	distlock_waiters                   gauge     {kind, store}
//
// acquire_duration_seconds times each acquisition call (Lock, TryLock,
// RLock, TryRLock, Acquire, TryAcquire, Campaign), waits included, by how
// it ended: outcome "ok", "busy" (a try found the lock taken), "timeout",
// "canceled" (the context ended first) or "error". calls_total counts
// every call, those too, by op: "lock", "try-lock", "rlock", "try-rlock",
// "acquire", "try-acquire", "campaign", "unlock", "extend", "once",
// "once-per" (Once and OncePer count as a whole; the acquisition inside
// them is a call of its own).
//
// hold_duration_seconds times each hold, from its acquisition to its end:
// its release, its loss, the end of a fixed lease, or Close. held_locks
// is the number of holds of this process now: a re-entered lock counts
// once, each reader of a read-write lock once, a semaphore's acquisition
// once whatever its permits. waiters is the number of its acquisitions
// waiting now for a lock held by another owner.
//
// renewals_total counts the watchdog's renewals of leases, by result:
// "ok", or "failed" (the renewal is retried until the lease's deadline,
// when the lock is lost if none succeeded); renewal_duration_seconds
// times both, from the request to the answer or to the give-up.
// losses_total counts the holds that ended before their Unlock, by
// reason: "gone" (the store no longer had the lock: deleted, expired on
// the server, lost in a failover), "revoked" (Revoke or ForceUnlock, by an
// operator), "renewal-failed" (no renewal was confirmed before the lease's
// deadline: the store down, erring or slow, or this process paused), and
// "expired" (a fixed lease, WithFixedLease, ran its course: no fault where
// the lease is meant to end on its own, so the alert below leaves it out).
//
// The label kind is "mutex", "fair-mutex", "rwmutex", "semaphore" or
// "election" (a MultiMutex and Once are mutexes); store is "redis",
// "redlock", "etcd", "postgresql", "mysql" or "other". WithLockNames
// adds a label name, last, for a bounded set of lock names.
//
// Series appear with their first event. The Collector's Observer methods
// run on the callers' and the lock engine's goroutines: they never block,
// and once a series exists they update it with atomic operations, without
// locks or allocation (only a store or a kind the Collector does not know
// of takes a mutex). BenchmarkObserverLockUnlock measures them: a few
// hundred nanoseconds for a Lock and an Unlock, against a round trip to
// the store of 100 µs or more.
//
// # Alerts
//
// Rules worth having (the README has them as a rules file):
//
//	# A lock was lost: a holder's lease context was cancelled under it,
//	# and its work may have been cut off, or overlapped by another's. Page.
//	increase(distlock_losses_total{reason!="expired"}[5m]) > 0
//
//	# Renewals fail: losses follow if they go on until the lease's deadline.
//	sum by (store) (rate(distlock_renewals_total{result="failed"}[5m])) > 0
//
//	# Callers wait for a lock longer than a lease (30 s by default).
//	histogram_quantile(0.99, sum by (kind, le) (rate(distlock_acquire_duration_seconds_bucket{outcome="ok"}[5m]))) > 30
//
//	# Waiters pile up: locks are asked for faster than they are given back.
//	deriv(sum(distlock_waiters)[15m:]) > 0 and sum(distlock_waiters) > 10
//
// # Dashboard
//
// Dashboard returns a Grafana dashboard of these metrics, also in the
// module as dashboard/distlock.json.
package prometheus
