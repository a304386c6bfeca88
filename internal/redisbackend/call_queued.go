package redisbackend

import "github.com/distlock/distlock/store"

// The calls of the scripts that take queued kinds. Each builder lists its
// script's keys and arguments in the order of the script's header.

// A queuedTake is the arguments fair_acquire.lua, rw_acquire.lua and
// sem_acquire.lua share, in this order: the lease and the place in the
// queue.
type queuedTake struct {
	Lease     any    // in ms
	Retention any    // the fencing counter's, in ms
	Host, PID any    // the owner's
	Queue     any    // the queue timeout in ms
	Seq       uint64 // the request's number
	ID        any    // the Backend's id, which hears of grants
	Mode      any    // 's' to publish with SPUBLISH
}

// queuedTake returns the arguments of r's queued acquisition.
func (b *Backend) queuedTake(r store.Request) queuedTake {
	return queuedTake{Lease: b.millis(r.Lease), Retention: b.retentionArg, Host: b.hostArg, PID: b.pidArg,
		Queue: b.millis(r.Queue), Seq: r.Seq, ID: b.idArg, Mode: b.modeArg}
}

// fairAcquireCall is a call of scripts/fair_acquire.lua.
type fairAcquireCall struct {
	Keys       lockKeys // KEYS[1..8]
	Owner      string   // ARGV[1]
	queuedTake          // ARGV[2..9]
	Kind       string   // ARGV[10]: 'fair' or 'elect'
	Value      string   // ARGV[11]: an election candidate's value
}

func (c fairAcquireCall) args() []any {
	return scriptArgs(fairAcquireScript, c.Keys[:], c.Owner,
		c.Lease, c.Retention, c.Host, c.PID, c.Queue, c.Seq, c.ID, c.Mode, c.Kind, c.Value)
}

// rwAcquireCall is a call of scripts/rw_acquire.lua.
type rwAcquireCall struct {
	Keys       lockKeys // KEYS[1..8]
	Owner      string   // ARGV[1]
	Hold       uint64   // ARGV[2]
	Side       string   // ARGV[3]: 'r' or 'w'
	queuedTake          // ARGV[4..11]
	Reenter    any      // ARGV[12]: flag, re-enter only
}

func (c rwAcquireCall) args() []any {
	return scriptArgs(rwAcquireScript, c.Keys[:], c.Owner, c.Hold, c.Side,
		c.Lease, c.Retention, c.Host, c.PID, c.Queue, c.Seq, c.ID, c.Mode, c.Reenter)
}

// semAcquireCall is a call of scripts/sem_acquire.lua.
type semAcquireCall struct {
	Keys       lockKeys // KEYS[1..8]
	Owner      string   // ARGV[1]
	Permits    int      // ARGV[2]
	Capacity   int      // ARGV[3]: as the caller knows it
	queuedTake          // ARGV[4..11]
}

func (c semAcquireCall) args() []any {
	return scriptArgs(semAcquireScript, c.Keys[:], c.Owner, c.Permits, c.Capacity,
		c.Lease, c.Retention, c.Host, c.PID, c.Queue, c.Seq, c.ID, c.Mode)
}

// semPermitsCall is a call of scripts/sem_permits.lua.
type semPermitsCall struct {
	Keys      lockKeys // KEYS[1..8]
	Capacity  int      // ARGV[1]: the new one
	Retention any      // ARGV[2]: the fencing counter's and the capacity's, in ms
	Mode      any      // ARGV[3]: 's' to publish with SPUBLISH
}

func (c semPermitsCall) args() []any {
	return scriptArgs(semPermitsScript, c.Keys[:], c.Capacity, c.Retention, c.Mode)
}
