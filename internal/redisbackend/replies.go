package redisbackend

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/distlock/distlock/store"
)

// acquireOutcome reads the reply of acquire.lua, fair_acquire.lua,
// rw_acquire.lua or sem_acquire.lua: {1, token, holds} or {1, token, holds,
// gseq, glease} (acquired), {2, pttl} (queued), {0, pttl} (not acquired),
// {-1} (another kind), {-3} (a write re-entry by an owner that only
// reads), {-4, cap} (more permits than the capacity); sem_acquire.lua adds
// the capacity as the last element of the first three.
func acquireOutcome(res []any) (store.Grant, error) {
	code, ok := replyInt(res, 0)
	var capacity int64
	if ok && (code == 1 && len(res) == 6 || (code == 0 || code == 2) && len(res) == 3) {
		capacity, _ = replyInt(res, len(res)-1)
		res = res[:len(res)-1]
	}
	switch {
	case !ok:
	case code == -1:
		return store.Grant{}, store.ErrWrongKind
	case code == -3:
		return store.Grant{}, fmt.Errorf("%w: the owner only reads now", store.ErrDeadlock)
	case code == -4:
		c, _ := replyInt(res, 1)
		return store.Grant{Capacity: int(c)}, fmt.Errorf("%w: more permits than the semaphore's %d", store.ErrInvalidOption, c)
	case code == 0 || code == 2:
		return store.Grant{Queued: code == 2, TTL: replyTTL(res, 1), Capacity: int(capacity)}, nil
	case code == 1 && (len(res) == 3 || len(res) == 5):
		tok, err := replyToken(res, 1)
		holds, ok := replyInt(res, 2)
		if err != nil || !ok {
			break
		}
		g := store.Grant{Acquired: true, Token: tok, Holds: int(holds), Capacity: int(capacity)}
		if len(res) == 5 {
			seq, ok1 := replyInt(res, 3)
			lease, ok2 := replyInt(res, 4)
			if !ok1 || !ok2 {
				break
			}
			g.Seq, g.Lease = uint64(seq), time.Duration(lease)*time.Millisecond
		}
		return g, nil
	}
	return store.Grant{}, fmt.Errorf("unexpected reply %v", res)
}

// refreshOutcome reads one reply of refresh.lua: {1, token, gseq, glease}
// (acquired), {2, pttl} (queued), with a semaphore's capacity added to
// both, {0} (no place), or an error reply: that waiter's step failed, its
// outcome is unknown.
func refreshOutcome(v any) (store.Grant, error) {
	if err := itemError(v); err != nil {
		return store.Grant{}, fmt.Errorf("%w: refresh: %w", store.ErrBackend, err)
	}
	res, _ := v.([]any)
	code, ok := replyInt(res, 0)
	var capacity int64
	if ok && (code == 1 && len(res) == 5 || code == 2 && len(res) == 3) {
		capacity, ok = replyInt(res, len(res)-1)
		res = res[:len(res)-1]
	}
	switch {
	case !ok:
	case code == 0 && len(res) == 1:
		return store.Grant{}, fmt.Errorf("%w: the place in the queue is gone", store.ErrNotHeld)
	case code == 2 && len(res) == 2:
		return store.Grant{Queued: true, TTL: replyTTL(res, 1), Capacity: int(capacity)}, nil
	case code == 1 && len(res) == 4:
		tok, err := replyToken(res, 1)
		seq, ok1 := replyInt(res, 2)
		lease, ok2 := replyInt(res, 3)
		if err == nil && ok1 && ok2 {
			return store.Grant{Acquired: true, Token: tok, Seq: uint64(seq), Lease: time.Duration(lease) * time.Millisecond,
				Capacity: int(capacity)}, nil
		}
	}
	return store.Grant{}, fmt.Errorf("%w: refresh: unexpected reply %v", store.ErrBackend, v)
}

// renewOutcome reads one reply of renew.lua or shared_renew.lua: 1
// (renewed), 2 (superseded), 0 (not held), or an error reply: that lock's
// step failed, its outcome is unknown.
func renewOutcome(v any) error {
	if err := itemError(v); err != nil {
		return fmt.Errorf("%w: renew: %w", store.ErrBackend, err)
	}
	n, ok := v.(int64)
	switch {
	case ok && n == 1:
		return nil
	case ok && n == 2:
		return store.ErrSuperseded
	case ok && n == 0:
		return fmt.Errorf("%w: renewal found another owner or none", store.ErrNotHeld)
	}
	return fmt.Errorf("%w: renew: unexpected reply %v", store.ErrBackend, v)
}

// itemError returns the error of one item of a batch script's replies
// (an error reply inside its array), or nil.
func itemError(v any) error {
	if err, ok := v.(error); ok {
		return err
	}
	return nil
}

// slice reads a script's reply, or its error, as an array.
func slice(reply any, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	res, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %v, not an array", reply)
	}
	return res, nil
}

// integer reads a script's reply, or its error, as an integer.
func integer(reply any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	n, ok := reply.(int64)
	if !ok {
		return 0, fmt.Errorf("unexpected reply %v, not an integer", reply)
	}
	return n, nil
}

// replyInt reads element i of a script's reply as an integer.
func replyInt(res []any, i int) (int64, bool) {
	if i >= len(res) {
		return 0, false
	}
	n, ok := res[i].(int64)
	return n, ok
}

// replyTTL reads element i of a script's reply, a PTTL: negative when the
// key has no expiry or does not exist.
func replyTTL(res []any, i int) time.Duration {
	if ms, ok := replyInt(res, i); ok && ms >= 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return -1
}

// replyToken reads element i of a script's reply, a fencing token: a
// string (the hash field) or an integer.
func replyToken(res []any, i int) (uint64, error) {
	if i >= len(res) {
		return 0, errors.New("no token")
	}
	switch v := res[i].(type) {
	case string:
		return strconv.ParseUint(v, 10, 64)
	case int64:
		if v >= 0 {
			return uint64(v), nil
		}
	}
	return 0, fmt.Errorf("token %v", res[i])
}
