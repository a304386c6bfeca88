package otel

import (
	"time"

	"github.com/distlock/distlock"
	"go.opentelemetry.io/otel/attribute"
)

// The attributes of the spans and metrics. None of them carries an owner
// id: the secret that releases a lock is never recorded, nor the public
// digest of it that Inspect shows.
const (
	kindKey    = attribute.Key("distlock.lock.kind") // "mutex", "fair-mutex", "rwmutex", "semaphore", "election"
	storeKey   = attribute.Key("distlock.store")     // "redis", "redlock", "etcd", "postgresql", "mysql", "other"
	nameKey    = attribute.Key("distlock.lock.name") // the lock's name; a MultiMutex's members joined with "+"
	outcomeKey = attribute.Key("distlock.outcome")   // "ok", "busy", "timeout", "canceled", "error"
	tokenKey   = attribute.Key("distlock.token")     // the fencing token of an acquisition
	waitKey    = attribute.Key("distlock.wait")      // an acquisition's wait, in seconds
	holdKey    = attribute.Key("distlock.hold")      // the hold id, unique in the process
	heldKey    = attribute.Key("distlock.held")      // how long a hold lasted, in seconds
	resultKey  = attribute.Key("distlock.result")    // a renewal's: "ok" or "failed"
	reasonKey  = attribute.Key("distlock.reason")    // a loss's distlock.LossReason

	dbSystemKey = attribute.Key("db.system.name")    // OpenTelemetry's name of the store's system, where it has one
	messageKey  = attribute.Key("exception.message") // an error's text, on the events that end a lease
)

// dbSystem is OpenTelemetry's db.system.name of a store, and whether it
// has one (etcd and unknown stores have none).
func dbSystem(store string) (string, bool) {
	switch store {
	case "redis", "redlock":
		return "redis", true
	case "postgresql", "mysql":
		return store, true
	}
	return "", false
}

// appendLock appends to attrs the attributes that say which lock a span
// is about.
func appendLock(attrs []attribute.KeyValue, kind distlock.Kind, store, name string) []attribute.KeyValue {
	attrs = append(attrs, kindKey.String(string(kind)), storeKey.String(store), nameKey.String(name))
	if sys, ok := dbSystem(store); ok {
		attrs = append(attrs, dbSystemKey.String(sys))
	}
	return attrs
}

// seconds is d in seconds, as OpenTelemetry measures durations.
func seconds(d time.Duration) float64 { return d.Seconds() }

// id is a token or hold id as an attribute value: they count up from 1
// and never reach 2⁶³.
func id(v uint64) int64 { return int64(v) }
