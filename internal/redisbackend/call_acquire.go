package redisbackend

import "github.com/distlock/distlock/store"

// The calls of the scripts that take plain mutexes. Each builder lists
// its script's keys and arguments in the order of the script's header.

// A plainTake is what acquire.lua and quorum_acquire.lua share: their
// keys and their first five arguments.
type plainTake struct {
	Keys      [4]string // KEYS[1..4]: L, F, Q, the owner's abandonment mark (Keys.plain)
	Owner     string    // ARGV[1]
	Hold      uint64    // ARGV[2]
	Lease     any       // ARGV[3]: in ms
	Retention any       // ARGV[4]: the fencing counter's, in ms
	Holder    any       // ARGV[5]: 'pid since host' (Backend.holderInfo)
}

// plainTake returns the keys and arguments of r's plain acquisition.
func (b *Backend) plainTake(r store.Request) plainTake {
	return plainTake{Keys: b.cfg.Keys.plain(r.Name, r.Owner), Owner: r.Owner, Hold: r.Hold, Lease: b.millis(r.Lease),
		Retention: b.retentionArg, Holder: b.holderInfo()}
}

// acquireCall is a call of scripts/acquire.lua.
type acquireCall struct {
	plainTake     // KEYS[1..4], ARGV[1..5]
	Reenter   any // ARGV[6]: flag, re-enter only
}

func (c acquireCall) args() []any {
	return scriptArgs(acquireScript, c.Keys[:], c.Owner, c.Hold, c.Lease, c.Retention, c.Holder, c.Reenter)
}

// quorumAcquireCall is a call of scripts/quorum_acquire.lua.
type quorumAcquireCall struct {
	plainTake        // KEYS[1..4], ARGV[1..5]
	Token     string // ARGV[6]: the proposed token
}

func (c quorumAcquireCall) args() []any {
	return scriptArgs(quorumAcquireScript, c.Keys[:], c.Owner, c.Hold, c.Lease, c.Retention, c.Holder, c.Token)
}

// multiAcquireCall is a call of scripts/multi_acquire.lua.
type multiAcquireCall struct {
	Lease     int64 // ARGV[1]: in ms
	Retention any   // ARGV[2]: the fencing counters', in ms
	Holder    any   // ARGV[3]: 'pid since host' (Backend.holderInfo)
	Members   []multiMember
}

// A multiMember is member i of a multiAcquireCall.
type multiMember struct {
	Keys  lockKeys // KEYS[8i-7..8i]
	Owner string   // ARGV[3+i]
}

func (c multiAcquireCall) args() []any {
	n := len(lockKeys{}) * len(c.Members)
	args := callArgs(multiAcquireScript, n, n+3+len(c.Members))
	for _, m := range c.Members {
		for _, k := range m.Keys {
			args = append(args, k)
		}
	}
	args = append(args, c.Lease, c.Retention, c.Holder)
	for _, m := range c.Members {
		args = append(args, m.Owner)
	}
	return args
}
