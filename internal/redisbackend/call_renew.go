package redisbackend

import "github.com/distlock/distlock/store"

// The calls of the scripts that renew many locks. A chunk's call is built
// in one slice, in the order of its script's header: the keys of every
// item, then the arguments of every item.

// shape is how many keys and arguments one item of a chunk of kind takes.
func (kind renewScriptKind) shape() (keys, args int) {
	switch kind {
	case renewHolders:
		return 3, 3
	case refreshPlaces:
		return 8, 7
	}
	return 1, 3
}

// build makes the script call of c from the requests it covers, rs[c.idx].
func (c *renewChunk) build(b *Backend, rs []store.Request) {
	nk, na := c.kind.shape()
	n := len(c.idx)
	args := callArgs(c.Script, n*nk, n*(nk+na))
	k := b.cfg.Keys
	for _, i := range c.idx {
		r := &rs[i]
		switch c.kind {
		case renewLeases: // renew.lua: KEYS[i], the lock hash
			args = append(args, k.Lock(r.Name))
		case renewHolders: // shared_renew.lua: KEYS[3i-2..3i], L, H and C
			for _, key := range k.shared(r.Name) {
				args = append(args, key)
			}
		case refreshPlaces: // refresh.lua: KEYS[k+1..k+8], L, F, Q, QT, QI, H, the mark, C
			for _, key := range k.script(r.Name, r.Owner) {
				args = append(args, key)
			}
		}
	}
	// The locks of a chunk mostly have one lease: it is boxed once.
	leaseMs, lease := int64(-1), any(nil)
	for _, i := range c.idx {
		r := &rs[i]
		if ms := r.Lease.Milliseconds(); ms != leaseMs {
			leaseMs, lease = ms, ms
		}
		switch c.kind {
		case refreshPlaces:
			// refresh.lua, ARGV[a+1..a+7]: owner, lease and queue timeout in
			// ms, the request's number, the fencing counter's retention, the
			// publish mode, a semaphore's capacity as the waiter knows it
			// (0 for the other kinds).
			capacity := 0
			if r.Kind == store.Semaphore {
				capacity = r.Capacity
			}
			args = append(args, r.Owner, lease, r.Queue.Milliseconds(), r.Seq, b.retentionArg, b.modeArg, capacity)
		default:
			// renew.lua and shared_renew.lua, ARGV[3i-2..3i]: owner, the new
			// lease in ms, the request's number.
			args = append(args, r.Owner, lease, r.Seq)
		}
	}
	c.Args = args
}
