package redisbackend

// The parts of the calls of the scripts that renew many locks: each item
// adds one lock's keys and arguments to a chunk, in the order of the
// script's header.

// A renewItem is lock i of a call of scripts/renew.lua.
type renewItem struct {
	L     string // KEYS[i]: the lock hash
	Owner string // ARGV[3i-2]
	Lease int64  // ARGV[3i-1]: the new lease in ms
	Seq   uint64 // ARGV[3i]: the request's number
}

func (it renewItem) addTo(c *renewChunk) {
	c.keys = append(c.keys, it.L)
	c.argv = append(c.argv, it.Owner, it.Lease, it.Seq)
}

// A sharedRenewItem is holder i of a call of scripts/shared_renew.lua.
type sharedRenewItem struct {
	Keys  [3]string // KEYS[3i-2..3i]: L, H, C (Keys.shared)
	Owner string    // ARGV[3i-2]
	Lease int64     // ARGV[3i-1]: the new lease in ms
	Seq   uint64    // ARGV[3i]: the request's number
}

func (it sharedRenewItem) addTo(c *renewChunk) {
	c.keys = append(c.keys, it.Keys[:]...)
	c.argv = append(c.argv, it.Owner, it.Lease, it.Seq)
}

// A refreshItem is waiter i of a call of scripts/refresh.lua, whose keys
// are KEYS[k+1..k+8] and arguments ARGV[a+1..a+7].
type refreshItem struct {
	Keys      lockKeys // KEYS[k+1..k+8]
	Owner     string   // ARGV[a+1]
	Lease     int64    // ARGV[a+2]: in ms, asked for the grant
	Queue     int64    // ARGV[a+3]: the queue timeout in ms
	Seq       uint64   // ARGV[a+4]: the request's number
	Retention any      // ARGV[a+5]: the fencing counter's, in ms
	Mode      any      // ARGV[a+6]: 's' to publish with SPUBLISH
	Capacity  int      // ARGV[a+7]: a semaphore's, as the waiter knows it; 0 for the other kinds
}

func (it refreshItem) addTo(c *renewChunk) {
	c.keys = append(c.keys, it.Keys[:]...)
	c.argv = append(c.argv, it.Owner, it.Lease, it.Queue, it.Seq, it.Retention, it.Mode, it.Capacity)
}
