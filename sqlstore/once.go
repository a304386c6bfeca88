package sqlstore

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/store"
)

// onceTable is a dialect's access to the records of jobs run once.
type onceTable interface {
	// onceRead reads the live record of the job name, and the database's
	// clock in µs.
	onceRead(ctx context.Context, name string) (now int64, rec store.Record, ok bool, err error)
	// onceForget deletes the record of the job name, and reports whether
	// a live one was there.
	onceForget(ctx context.Context, name string) (bool, error)
}

// CheckOnce implements store.OnceKeeper. Periods are counted by the
// database's clock.
func (s *Store) CheckOnce(ctx context.Context, name string, period time.Duration) (uint64, store.Record, bool, error) {
	if err := s.prepare(ctx); err != nil {
		return 0, store.Record{}, false, err
	}
	now, rec, ok, err := s.db.onceRead(ctx, name)
	if err != nil {
		return 0, store.Record{}, false, backendErr(err)
	}
	var p uint64
	if period > 0 {
		p = uint64(now / period.Microseconds())
	}
	return p, rec, ok, nil
}

// RecordOnce implements store.OnceKeeper: the record is written in the
// transaction that finds the lock name held with rec.Token.
func (s *Store) RecordOnce(ctx context.Context, name string, rec store.Record, keep time.Duration) (bool, error) {
	rec.Host, rec.PID = s.host, s.pid
	held := false
	err := s.one(ctx, name, false, func(r *row, st *step) error {
		if r == nil {
			return errDiscard
		}
		r.state.purge(st.now)
		for _, h := range r.state.Holders {
			held = held || h.Token == rec.Token
		}
		if !held {
			return errDiscard
		}
		return nil
	}, func(w *work) error {
		err := w.tx.saveOnce(ctx, name, rec, max(keep, time.Millisecond))
		if err != nil && !errors.Is(err, errConflict) {
			err = backendErr(err)
		}
		return err
	})
	return held, err
}

// ForgetOnce implements store.OnceKeeper.
func (s *Store) ForgetOnce(ctx context.Context, name string) (bool, error) {
	if err := s.prepare(ctx); err != nil {
		return false, err
	}
	had, err := s.db.onceForget(ctx, name)
	return had, backendErr(err)
}
