package prometheus

import "github.com/distlock/distlock"

// The label values the Collector knows in advance, in the order of their
// indexes. A value outside them (a store of another module naming itself,
// a kind or an outcome of a later version) is still reported, as it is,
// by a slower path: see EndCall and Event.
var (
	kinds    = [...]string{"mutex", "fair-mutex", "rwmutex", "semaphore", "election"}
	stores   = [...]string{"redis", "redlock", "etcd", "postgresql", "mysql", "other"}
	ops      = [...]string{"lock", "try-lock", "rlock", "try-rlock", "acquire", "try-acquire", "campaign", "unlock", "extend", "once", "once-per"}
	outcomes = [...]string{"ok", "busy", "timeout", "canceled", "error"}
	reasons  = [...]string{"gone", "revoked", "renewal-failed", "expired"}
	results  = [...]string{"ok", "failed"}
)

const (
	nKinds    = len(kinds)
	nStores   = len(stores)
	nOps      = len(ops)
	nOutcomes = len(outcomes)
	nReasons  = len(reasons)
	nResults  = len(results)
)

// The indexes of results.
const (
	resultOK = iota
	resultFailed
)

// otherName is the value of the label name for a lock outside the set
// given to WithLockNames.
const otherName = "other"

// kindIndex is k's index in kinds, -1 if it is not there. Like the other
// index functions it is a switch: no hashing on the path of every event.
func kindIndex(k distlock.Kind) int {
	switch k {
	case distlock.KindMutex:
		return 0
	case distlock.KindFairMutex:
		return 1
	case distlock.KindRWMutex:
		return 2
	case distlock.KindSemaphore:
		return 3
	case distlock.KindElection:
		return 4
	}
	return -1
}

// storeIndex is s's index in stores, -1 if it is not there.
func storeIndex(s string) int {
	switch s {
	case "redis":
		return 0
	case "redlock":
		return 1
	case "etcd":
		return 2
	case "postgresql":
		return 3
	case "mysql":
		return 4
	case "other":
		return 5
	}
	return -1
}

// opIndex is op's index in ops, -1 if it is not there.
func opIndex(op string) int {
	switch op {
	case "lock":
		return 0
	case "try-lock":
		return 1
	case "rlock":
		return 2
	case "try-rlock":
		return 3
	case "acquire":
		return 4
	case "try-acquire":
		return 5
	case "campaign":
		return 6
	case "unlock":
		return 7
	case "extend":
		return 8
	case "once":
		return 9
	case "once-per":
		return 10
	}
	return -1
}

// outcomeIndex is o's index in outcomes, -1 if it is not there.
func outcomeIndex(o distlock.Outcome) int {
	switch o {
	case distlock.OutcomeOK:
		return 0
	case distlock.OutcomeBusy:
		return 1
	case distlock.OutcomeTimeout:
		return 2
	case distlock.OutcomeCanceled:
		return 3
	case distlock.OutcomeError:
		return 4
	}
	return -1
}

// reasonIndex is r's index in reasons, -1 if it is not there.
func reasonIndex(r distlock.LossReason) int {
	switch r {
	case distlock.LossGone:
		return 0
	case distlock.LossRevoked:
		return 1
	case distlock.LossRenewalFailed:
		return 2
	case distlock.LossExpired:
		return 3
	}
	return -1
}
