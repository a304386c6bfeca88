package redisbackend

import "github.com/distlock/distlock/store"

// The calls of the scripts that let go of a lock. Each builder lists its
// script's keys and arguments in the order of the script's header.

// releasePlainCall is a call of scripts/release_plain.lua.
type releasePlainCall struct {
	L     string // KEYS[1]: the lock hash
	Owner string // ARGV[1]
	Hold  uint64 // ARGV[2]: 0 for every hold
	Mode  any    // ARGV[3]: 's' to publish with SPUBLISH
	ID    any    // ARGV[4]: the message, the Backend's id
}

func (c releasePlainCall) args() []any {
	return scriptArgs(releasePlainScript, []string{c.L}, c.Owner, c.Hold, c.Mode, c.ID)
}

// A handOn is the arguments release.lua and abandon.lua share, ARGV[3..7]:
// how they tell the waiters and hand the lock on.
type handOn struct {
	Channel   string // the release channel
	Mode      any    // 's' to publish with SPUBLISH
	ID        any    // the message, the Backend's id
	Retention any    // the fencing counter's, in ms (a grant mints a token)
	Queued    any    // flag, the owner may have a place in a queue
}

// handOn returns the arguments with which r's lock is handed on.
func (b *Backend) handOn(r store.Request) handOn {
	return handOn{Channel: b.cfg.Keys.Channel(r.Name), Mode: b.modeArg, ID: b.idArg, Retention: b.retentionArg,
		Queued: flag(r.Kind.Queued())}
}

// releaseCall is a call of scripts/release.lua.
type releaseCall struct {
	Keys   lockKeys // KEYS[1..8]
	Owner  string   // ARGV[1]
	Hold   uint64   // ARGV[2]: 0 for every hold, and the place
	handOn          // ARGV[3..7]
}

func (c releaseCall) args() []any {
	return scriptArgs(releaseScript, c.Keys[:], c.Owner, c.Hold, c.Channel, c.Mode, c.ID, c.Retention, c.Queued)
}

// abandonCall is a call of scripts/abandon.lua.
type abandonCall struct {
	Keys   lockKeys // KEYS[1..8], with the owner's abandonment mark
	Owner  string   // ARGV[1]
	Mark   int64    // ARGV[2]: how long the mark lasts, in ms
	handOn          // ARGV[3..7]
}

func (c abandonCall) args() []any {
	return scriptArgs(abandonScript, c.Keys[:], c.Owner, c.Mark, c.Channel, c.Mode, c.ID, c.Retention, c.Queued)
}
