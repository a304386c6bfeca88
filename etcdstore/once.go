package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The records of jobs run once (store.OnceKeeper) are the keys
// <prefix>done/<name>, each on an etcd lease of the time it is kept.
func (s *Store) doneKey(name string) string { return s.prefix + "done/" + name }

// A doneRecord is the value of a done key.
type doneRecord struct {
	Token uint64 `json:"token"`
	At    int64  `json:"at"` // ms since the epoch, by the runner's clock
	PID   int    `json:"pid"`
	Host  string `json:"host"`
	Err   string `json:"err,omitempty"`
}

// errPeriods refuses OncePer: its periods are counted by the store's
// clock, and etcd has none that a request can read.
var errPeriods = fmt.Errorf("%w: OncePer on etcd: etcd has no clock to count periods by (Once is served)", store.ErrUnsupported)

// CheckOnce implements store.OnceKeeper for jobs per key (period 0).
func (s *Store) CheckOnce(ctx context.Context, name string, period time.Duration) (uint64, store.Record, bool, error) {
	switch {
	case s.err != nil:
		return 0, store.Record{}, false, s.err
	case period != 0:
		return 0, store.Record{}, false, errPeriods
	}
	resp, err := s.cli.Get(ctx, s.doneKey(name))
	if err != nil {
		return 0, store.Record{}, false, backendErr(err)
	}
	if len(resp.Kvs) == 0 {
		return 0, store.Record{}, false, nil
	}
	var d doneRecord
	if json.Unmarshal(resp.Kvs[0].Value, &d) != nil {
		return 0, store.Record{}, false, nil // unreadable: as if none
	}
	return 0, store.Record{Token: d.Token, At: time.UnixMilli(d.At), PID: d.PID, Host: d.Host, Err: d.Err}, true, nil
}

// RecordOnce implements store.OnceKeeper: the record is written only
// while the lock name is held with rec.Token, in one transaction: the
// lock (a mutex) has one key, the holder's, made at revision rec.Token.
func (s *Store) RecordOnce(ctx context.Context, name string, rec store.Record, keep time.Duration) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	if rec.Period != 0 {
		return false, errPeriods
	}
	lease, err := s.cli.Grant(ctx, ttlOf(keep))
	if err != nil {
		return false, backendErr(err)
	}
	v, _ := json.Marshal(doneRecord{Token: rec.Token, At: rec.At.UnixMilli(), PID: s.pid, Host: s.host, Err: rec.Err})
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(s.lockDir(name)).WithPrefix(), "=", int64(rec.Token))).
		Then(clientv3.OpPut(s.doneKey(name), string(v), clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil {
		return false, backendErr(err)
	}
	if !resp.Succeeded {
		_, _ = s.cli.Revoke(ctx, lease.ID)
	}
	return resp.Succeeded, nil
}

// ForgetOnce implements store.OnceKeeper.
func (s *Store) ForgetOnce(ctx context.Context, name string) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	resp, err := s.cli.Delete(ctx, s.doneKey(name))
	if err != nil {
		return false, backendErr(err)
	}
	return resp.Deleted > 0, nil
}
