package harness

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A traceHook timestamps, once armed, the first read from any connection
// of a go-redis client (for a waiter: the release notification arriving)
// and the first command sent after it (the acquisition attempt) and its
// reply. The hand-over scenario uses it in the waiter process to split a
// hand-over's latency into its steps.
type traceHook struct {
	armed             atomic.Bool
	read, issue, done atomic.Int64 // unix ns; 0 when not seen
}

var _ redis.Hook = (*traceHook)(nil)

// arm clears the timestamps and starts recording.
func (h *traceHook) arm() {
	h.read.Store(0)
	h.issue.Store(0)
	h.done.Store(0)
	h.armed.Store(true)
}

func (h *traceHook) disarm() { h.armed.Store(false) }

type tracedConn struct {
	net.Conn
	h *traceHook
}

func (c tracedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.h.armed.Load() {
		c.h.read.CompareAndSwap(0, time.Now().UnixNano())
	}
	return n, err
}

func (h *traceHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return tracedConn{c, h}, nil
	}
}

func (h *traceHook) around(next func() error) error {
	if !h.armed.Load() || h.read.Load() == 0 {
		return next()
	}
	first := h.issue.CompareAndSwap(0, time.Now().UnixNano())
	err := next()
	if first {
		h.done.Store(time.Now().UnixNano())
	}
	return err
}

func (h *traceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.around(func() error { return next(ctx, cmd) })
	}
}

func (h *traceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(func() error { return next(ctx, cmds) })
	}
}

// A Breakdown splits one hand-over: from the start of the release to the
// notification's first byte read by the waiter process, to the waiter
// sending its acquisition attempt, to that attempt's reply, to Lock
// returning. Zero when not traced.
//
// For a fair mutex (Grant) the notification is the grant itself: the
// release script made the waiter the owner, so there is no attempt, and
// ToIssue and RoundTrip are zero; ToReturn runs from the grant's read.
// AfterGrant is then when the waiter's first command after the grant
// left, from the grant's read: the renewal of the granted lease to the
// full TTL, which Lock does not wait for. Zero when it left only after
// Lock had returned (the trace stops there).
//
// FromRead is the time from the notification's read to Lock returning (for
// a plain mutex ToIssue + RoundTrip + ToReturn). Release is how long the
// holder's release call took, start to reply, as the holder saw it.
//
// A Breakdown of several rounds (medianBreakdown) holds the median of each
// step, AfterGrant over the rounds where it was seen; Rounds counts the
// rounds and Early those where the renewal left before Lock returned.
type Breakdown struct {
	ToRead, ToIssue, RoundTrip, ToReturn time.Duration
	Grant                                bool
	AfterGrant                           time.Duration
	FromRead                             time.Duration
	Release                              time.Duration
	Rounds, Early                        int
}

// SplitHandover makes the Breakdown of one traced hand-over of lib from
// unix-ns timestamps: t0 the start of the release and rel its reply (holder),
// t1 Lock returning, read the first byte read after arming, issue and done
// the first command sent after that read and its reply (waiter; 0 when not
// seen). It returns false when the steps are not in order (a step was
// missed, e.g. the waiter was armed after the release).
func SplitHandover(lib string, t0, rel, t1, read, issue, done int64) (Breakdown, bool) {
	if read <= t0 || t1 < read || rel < t0 {
		return Breakdown{}, false
	}
	br := Breakdown{ToRead: time.Duration(read - t0), FromRead: time.Duration(t1 - read), Release: time.Duration(rel - t0), Rounds: 1}
	if granted(lib) {
		br.Grant = true
		br.ToReturn = br.FromRead
		if issue >= read && issue <= t1 {
			br.AfterGrant = time.Duration(issue - read)
			br.Early = 1
		}
		return br, true
	}
	if issue < read || done < issue || t1 < done {
		return Breakdown{}, false
	}
	br.ToIssue = time.Duration(issue - read)
	br.RoundTrip = time.Duration(done - issue)
	br.ToReturn = time.Duration(t1 - done)
	return br, true
}

// traced lists the libraries whose waiter can be traced: go-redis based
// and woken by a message (the spinning baseline never waits, redsync and
// bsm/redislock poll on a timer).
func traced(lib string) bool { return lib == Distlock || lib == DistlockFair || lib == RawPubSub }

// granted lists the libraries whose release hands the lock to the waiter
// (the message is the grant): no acquisition attempt follows it.
func granted(lib string) bool { return lib == DistlockFair }
