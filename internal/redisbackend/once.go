package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/store"
)

func encodeRecord(r store.Record) string {
	return fmt.Sprintf("%d %d %d %d %s\n%s", r.Period, r.Token, r.At.UnixMilli(), r.PID, r.Host, r.Err)
}

func decodeRecord(s string) (store.Record, bool) {
	head, errText, _ := strings.Cut(s, "\n")
	f := strings.SplitN(head, " ", 5)
	if len(f) != 5 {
		return store.Record{}, false
	}
	p, err1 := strconv.ParseUint(f[0], 10, 64)
	tok, err2 := strconv.ParseUint(f[1], 10, 64)
	ms, err3 := strconv.ParseInt(f[2], 10, 64)
	pid, err4 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return store.Record{}, false
	}
	return store.Record{Period: p, Token: tok, At: time.UnixMilli(ms), PID: pid, Host: f[4], Err: errText}, true
}

// CheckOnce reads the record of the job name and the period the server's
// clock is in (period 0: a job per key, and the period returned is 0). ok
// is false when there is no record (or an unreadable one).
func (b *Backend) CheckOnce(ctx context.Context, name string, period time.Duration) (now uint64, rec store.Record, ok bool, err error) {
	res, err := slice(b.conn.Eval(ctx, onceCheckScript,
		onceCheckCall{Done: b.cfg.Keys.Done(name), Period: period.Milliseconds()}.args()))
	if err != nil {
		return 0, store.Record{}, false, b.backendErr(ctx, err)
	}
	if len(res) != 2 {
		return 0, store.Record{}, false, fmt.Errorf("%w: once: unexpected reply %v", store.ErrBackend, res)
	}
	now, _ = strconv.ParseUint(fmt.Sprint(res[0]), 10, 64)
	if s, isString := res[1].(string); isString {
		rec, ok = decodeRecord(s)
	}
	return now, rec, ok, nil
}

// RecordOnce records that the job name ran, as rec says (rec.Token: the
// token of its runner's hold of the lock name), for keep. It reports false
// when the lock is no longer held with that token (the runner's lease
// ended): nothing is recorded then. Under replica acknowledgement, a record
// that too few replicas acknowledged is reported true with an error
// wrapping ErrNotReplicated: the master has it, a failover may lose it.
func (b *Backend) RecordOnce(ctx context.Context, name string, rec store.Record, keep time.Duration) (bool, error) {
	rec.Host, rec.PID = b.cfg.Host, b.cfg.PID
	reply, ackErr, err := b.runAcked(ctx, onceDoneScript, onceDoneCall{L: b.cfg.Keys.Lock(name), Done: b.cfg.Keys.Done(name),
		Token: strconv.FormatUint(rec.Token, 10), Record: encodeRecord(rec), Keep: max(keep.Milliseconds(), 1)}.args())
	n, err := integer(reply, err)
	if err != nil {
		return false, b.backendErr(ctx, err)
	}
	if n == 1 && ackErr != nil {
		return true, fmt.Errorf("record: %w", ackErr)
	}
	return n == 1, nil
}

// ForgetOnce deletes the record of the job name, and reports whether it
// had one.
func (b *Backend) ForgetOnce(ctx context.Context, name string) (bool, error) {
	n, err := b.conn.Del(ctx, b.cfg.Keys.Done(name))
	if err != nil {
		return false, b.backendErr(ctx, err)
	}
	return n == 1, nil
}
