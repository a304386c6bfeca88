// Package redisbackend stores distlock locks in Redis: one Lua script per
// atomic step (acquire, release, renew, inspect, force-unlock) and pub/sub
// release notifications. It works with standalone, Sentinel and Cluster
// clients; on Cluster it publishes with SPUBLISH and batches renewals per
// slot. It talks to Redis through a Conn (conn.go): GoRedis for go-redis,
// another module's for another client library.
package redisbackend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/store"
)

// pipelineLimit is how many acquire and release round trips may be on their
// way at once before further calls are pipelined together.
const pipelineLimit = 2

// Config configures a Backend.
type Config struct {
	Keys Keys
	// FenceRetention is how long a fencing counter outlives the last
	// acquisition of its lock.
	FenceRetention time.Duration
	// Host and PID describe this process in the lock state.
	Host string
	PID  int
	// Replicas, if above 0, is how many replicas must acknowledge an
	// acquisition or renewal (WAIT) within ReplicaTimeout for it to count.
	Replicas       int
	ReplicaTimeout time.Duration
}

// Backend implements store.Store on a Redis client.
type Backend struct {
	conn    Conn
	cfg     Config
	pid     string
	sharded bool   // Redis Cluster: sharded pub/sub, renewals grouped by slot
	id      string // random; published with this backend's releases
	notify  *notifier
	pipe    *pipeliner
	// The script arguments that never change, made once (an argument is
	// an interface value, and making one from a string allocates).
	hostArg, pidArg, retentionArg, modeArg, idArg any
	boxedMillis                                   atomic.Pointer[[]boxedMillis] // see millis
	lastInfo                                      atomic.Pointer[boxedInfo]     // see holderInfo

	checkMu sync.Mutex
	checked atomic.Bool
}

// New returns a Backend on conn. It does not talk to Redis until it is
// used.
func New(conn Conn, cfg Config) *Backend {
	sharded := conn.Sharded()
	var id [8]byte
	_, _ = rand.Read(id[:])
	b := &Backend{conn: conn, cfg: cfg, pid: strconv.Itoa(cfg.PID), sharded: sharded, id: hex.EncodeToString(id[:])}
	b.hostArg, b.pidArg, b.retentionArg, b.modeArg, b.idArg = cfg.Host, b.pid, b.retention(), b.publishMode(), b.id
	b.notify = newNotifier(conn, sharded, b.id)
	limit := pipelineLimit
	if p, ok := conn.(interface{ AutoPipelines() bool }); ok && p.AutoPipelines() {
		limit = math.MaxInt
	}
	b.pipe = newPipeliner(conn, limit)
	return b
}

// Close stops notifications. It does not close the client under conn,
// which belongs to the caller.
func (b *Backend) Close() error { return b.notify.close() }

// System names the store for observers (store.SystemNamer).
func (b *Backend) System() string { return "redis" }

func (b *Backend) publishMode() string {
	if b.sharded {
		return "s"
	}
	return "p"
}

// Acquire implements store.Store.
func (b *Backend) Acquire(ctx context.Context, r store.Request) (store.Grant, error) {
	if err := b.checkServer(ctx); err != nil {
		return store.Grant{}, err
	}
	k := b.cfg.Keys
	var script *Script
	var call []any // see callArgs
	switch {
	case r.Kind == store.Semaphore:
		script, call = semAcquireScript, semAcquireCall{Keys: k.script(r.Name, r.Owner), Owner: r.Owner,
			Permits: r.Permits, Capacity: r.Capacity, queuedTake: b.queuedTake(r)}.args()
	case r.Kind == store.Read || r.Kind == store.Write:
		script, call = rwAcquireScript, rwAcquireCall{Keys: k.script(r.Name, r.Owner), Owner: r.Owner,
			Hold: r.Hold, Side: side(r.Kind), queuedTake: b.queuedTake(r), Reenter: flag(r.Reenter)}.args()
	case (r.Kind == store.Fair || r.Kind == store.Election) && !r.Reenter:
		kind := "fair"
		if r.Kind == store.Election {
			kind = "elect"
		}
		script, call = fairAcquireScript, fairAcquireCall{Keys: k.script(r.Name, r.Owner), Owner: r.Owner,
			queuedTake: b.queuedTake(r), Kind: kind, Value: r.Value}.args()
	default: // a plain mutex, and re-entry into a fair one or an election
		script, call = acquireScript, acquireCall{plainTake: b.plainTake(r), Reenter: flag(r.Reenter)}.args()
	}
	reply, ackErr, err := b.runAcked(ctx, script, call)
	res, err := slice(reply, err)
	if err != nil && script == acquireScript && !r.Reenter && isReply(b.conn, err, "TRYAGAIN") {
		// A Cluster slot half migrated: the script's keys are split
		// between two nodes, and Redis refused to run it. Nothing was
		// applied: not acquired, try again shortly.
		return store.Grant{TTL: migratingRetry}, nil
	}
	if err != nil {
		return store.Grant{}, b.backendErr(ctx, err)
	}
	g, err := acquireOutcome(res)
	if err == nil && g.Queued && r.Queue <= 0 {
		err = errors.New("queued without a queue timeout")
	}
	if err != nil && !errors.Is(err, store.ErrWrongKind) && !errors.Is(err, store.ErrDeadlock) &&
		!errors.Is(err, store.ErrInvalidOption) {
		return store.Grant{}, fmt.Errorf("%w: acquire: %w", store.ErrBackend, err)
	}
	if err == nil && g.Acquired && ackErr != nil {
		// Taken on the master only: not confirmed. The engine counts it
		// as possibly applied and releases it.
		return store.Grant{}, ackErr
	}
	return g, err
}

// migratingRetry is how soon a plain acquisition refused with TRYAGAIN (its
// slot half migrated) is tried again.
const migratingRetry = 50 * time.Millisecond

// AcquireAll implements store.Store: the members that live in one slot
// (all of them, on a standalone or Sentinel server) are taken in one
// script, all or none; the groups go in the order of their first member.
func (b *Backend) AcquireAll(ctx context.Context, rs []store.Request) ([]store.Grant, error) {
	if err := b.checkServer(ctx); err != nil {
		return nil, err
	}
	var groups [][]int // indexes into rs
	at := map[int]int{}
	for i, r := range rs {
		slot := 0
		if b.sharded {
			slot = Slot(r.Name)
		}
		j, ok := at[slot]
		if !ok {
			j = len(groups)
			at[slot] = j
			groups = append(groups, nil)
		}
		groups[j] = append(groups[j], i)
	}
	gs := make([]store.Grant, 0, len(rs))
	for _, group := range groups {
		call := multiAcquireCall{Lease: rs[group[0]].Lease.Milliseconds(), Retention: b.retentionArg, Holder: b.holderInfo(),
			Members: make([]multiMember, 0, len(group))}
		for _, i := range group {
			call.Members = append(call.Members, multiMember{Keys: b.cfg.Keys.script(rs[i].Name, rs[i].Owner), Owner: rs[i].Owner})
		}
		reply, ackErr, err := b.runAcked(ctx, multiAcquireScript, call.args())
		res, err := slice(reply, err)
		if err != nil {
			return gs, b.backendErr(ctx, err)
		}
		code, ok := replyInt(res, 0)
		switch {
		case ok && code == 1 && len(res) == len(group)+1 && ackErr != nil:
			return gs, ackErr // taken on the master only: rolled back by the engine
		case ok && code == 1 && len(res) == len(group)+1:
			for j := range group {
				tok, err := replyToken(res, j+1)
				if err != nil {
					return gs, fmt.Errorf("%w: acquire: unexpected reply %v", store.ErrBackend, res)
				}
				gs = append(gs, store.Grant{Acquired: true, Token: tok, Holds: 1})
			}
			continue
		case ok && (code == 0 || code == -1) && len(res) >= 2:
			j, _ := replyInt(res, 1)
			if j < 1 || int(j) > len(group) {
				break
			}
			for range j - 1 { // taken by nobody: the group is all or none
				gs = append(gs, store.Grant{})
			}
			if code == -1 {
				return gs, store.ErrWrongKind
			}
			return append(gs, store.Grant{TTL: replyTTL(res, 2)}), nil
		}
		return gs, fmt.Errorf("%w: acquire: unexpected reply %v", store.ErrBackend, res)
	}
	return gs, nil
}

// side is the script argument for the side of a read-write lock.
func side(k store.Kind) string {
	if k == store.Write {
		return "w"
	}
	return "r"
}

func (b *Backend) retention() int64 { return b.cfg.FenceRetention.Milliseconds() }

// Release implements store.Store.
func (b *Backend) Release(ctx context.Context, r store.Request) (store.Release, error) {
	k := b.cfg.Keys
	var reply any
	var err error
	if r.Kind == store.Plain {
		reply, err = b.pipe.run(ctx, releasePlainScript, releasePlainCall{L: k.Lock(r.Name), Owner: r.Owner, Hold: r.Hold,
			Mode: b.modeArg, ID: b.idArg}.args())
	} else {
		reply, err = b.pipe.run(ctx, releaseScript, releaseCall{Keys: k.script(r.Name, ""), Owner: r.Owner, Hold: r.Hold,
			handOn: b.handOn(r)}.args())
	}
	n, err := integer(reply, err)
	if err != nil {
		return 0, b.backendErr(ctx, err)
	}
	switch n {
	case 1:
		return store.Freed, nil
	case 2:
		return store.Remaining, nil
	case -1:
		return store.AlreadyReleased, nil
	default:
		return store.NotOwner, nil
	}
}

// Abandon implements store.Store.
func (b *Backend) Abandon(ctx context.Context, r store.Request) (bool, error) {
	n, err := integer(b.pipe.run(ctx, abandonScript, abandonCall{Keys: b.cfg.Keys.script(r.Name, r.Owner), Owner: r.Owner,
		Mark: max(r.Lease.Milliseconds(), 1), handOn: b.handOn(r)}.args()))
	if err != nil {
		return false, b.backendErr(ctx, err)
	}
	return n == 1, nil
}

// SetPermits sets the capacity of the named semaphore to n: waiters whose
// permits now fit are let in at once; permits held are never revoked. It
// returns the capacity before (0 if it was not set) and the permits held
// after those grants.
func (b *Backend) SetPermits(ctx context.Context, name string, n int) (before, held int, err error) {
	res, err := slice(b.conn.Eval(ctx, semPermitsScript, semPermitsCall{Keys: b.cfg.Keys.script(name, ""), Capacity: n,
		Retention: b.retentionArg, Mode: b.modeArg}.args()))
	if err != nil {
		return 0, 0, b.backendErr(ctx, err)
	}
	code, ok := replyInt(res, 0)
	switch {
	case ok && code == -1:
		return 0, 0, store.ErrWrongKind
	case ok && len(res) == 2:
		h, _ := replyInt(res, 1)
		return int(code), int(h), nil
	}
	return 0, 0, fmt.Errorf("%w: set permits: unexpected reply %v", store.ErrBackend, res)
}

// Watch implements store.Store. Plain locks' releases are published on
// the lock's release channel, which every waiting process watches; grants
// of a queued kind go to the grant channel of the grantee's Backend alone.
func (b *Backend) Watch(ctx context.Context, name string, kind store.Kind, wake func(store.Notice)) (func(), error) {
	channel := b.cfg.Keys.Channel(name)
	if kind.Queued() {
		channel = b.cfg.Keys.Grants(name, b.id)
	}
	return b.notify.watch(ctx, channel, func(payload string, lost bool) {
		grants := parseGrants(payload)
		if lost || grants == nil {
			wake(store.Notice{}) // a release, or notices may have been lost
			return
		}
		for _, g := range grants {
			wake(g)
		}
	})
}

// backendErr wraps err in ErrBackend, unless it is ctx's own end: a
// deadline that is not ctx's (a dial or read timeout of the client) is a
// backend failure. An error of a request that the client never sent (see
// Conn.Unsent) wraps store.ErrUnsent too.
func (b *Backend) backendErr(ctx context.Context, err error) error { return connErr(b.conn, ctx, err) }

// connErr is backendErr for a failure of conn.
func connErr(conn Conn, ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	unsent := conn.Unsent(err)
	err = fmt.Errorf("%w: %w", store.ErrBackend, err)
	if unsent {
		return notSent(err)
	}
	return err
}

// notSent marks err, the failure of a request that was never sent, with
// store.ErrUnsent; its message stays as it is.
func notSent(err error) error {
	if err == nil || errors.Is(err, store.ErrUnsent) {
		return err
	}
	return unsentError{err}
}

type unsentError struct{ error }

func (e unsentError) Unwrap() []error { return []error{e.error, store.ErrUnsent} }

// List returns the names of the locks that exist now and match the glob
// pattern (SCAN, never KEYS; every master of a cluster).
func (b *Backend) List(ctx context.Context, pattern string) ([]string, error) {
	prefix := b.cfg.Keys.Lock("")
	prefix = prefix[:len(prefix)-2] // without "{}"
	match := escapeGlob(prefix) + "{" + pattern + "}"
	seen := map[string]bool{}
	err := b.conn.Scan(ctx, match, func(key string) {
		if name := key[len(prefix)+1 : len(key)-1]; !strings.ContainsAny(name, "{}") { // else not ours: lock names have no braces
			seen[name] = true
		}
	})
	if err != nil {
		return nil, b.backendErr(ctx, err)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// escapeGlob quotes the characters that SCAN MATCH treats as a pattern.
func escapeGlob(s string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// Err implements store.Validator: a Backend is always usable.
func (b *Backend) Err() error { return nil }

// Validate implements store.Validator. Under replica acknowledgement a
// lease, set by an acquisition or by Extend, must last at least six
// times the acknowledgement timeout, so that a renewal that waits for the
// replicas is answered well within it; a place in a queue at least three
// times, since a grant's first lease is the shorter of the lease and the
// place's, and its confirmation must be answered within it.
func (b *Backend) Validate(kind store.Kind, lease, queue time.Duration) error {
	if b.cfg.Replicas == 0 {
		return nil
	}
	if lease < 6*b.cfg.ReplicaTimeout {
		return fmt.Errorf("%w: a lease of %v is shorter than six times the replica acknowledgement timeout %v", store.ErrInvalidOption, lease, b.cfg.ReplicaTimeout)
	}
	if kind.Queued() && queue > 0 && queue < 3*b.cfg.ReplicaTimeout {
		return fmt.Errorf("%w: a queue timeout of %v is shorter than three times the replica acknowledgement timeout %v", store.ErrInvalidOption, queue, b.cfg.ReplicaTimeout)
	}
	return nil
}
