package sqlstore

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/glob"
	"github.com/distlock/distlock/store"
)

// Inspect implements store.Inspector, from the committed row: it locks
// nothing. LastToken is the last token issued for the name, kept while
// the row is.
func (s *Store) Inspect(ctx context.Context, name string) (store.State, error) {
	if err := s.prepare(ctx); err != nil {
		return store.State{}, err
	}
	rows, now, err := s.db.read(ctx, []string{name})
	if err != nil {
		return store.State{}, backendErr(err)
	}
	if len(rows) == 0 {
		return store.State{TTL: -1}, nil
	}
	return rows[0].state.inspect(now, rows[0].token), nil
}

// List implements store.Lister.
func (s *Store) List(ctx context.Context, pattern string) ([]string, error) {
	if err := s.prepare(ctx); err != nil {
		return nil, err
	}
	names, err := s.db.held(ctx)
	if err != nil {
		return nil, backendErr(err)
	}
	out := names[:0]
	for _, n := range names {
		if glob.Match(pattern, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// ForceUnlock implements store.ForceUnlocker: the holders' processes are
// told (RevokeWatcher), and the lock goes to its waiters.
func (s *Store) ForceUnlock(ctx context.Context, name string) (bool, error) {
	var had bool
	err := s.one(ctx, name, false, func(r *row, st *step) error {
		if r == nil {
			return errDiscard
		}
		had = r.state.forceUnlock(st)
		return nil
	})
	return had, err
}

// Revoke implements store.Revoker.
func (s *Store) Revoke(ctx context.Context, name string) (time.Duration, error) {
	var left time.Duration
	err := s.one(ctx, name, false, func(r *row, st *step) error {
		if r == nil {
			return errDiscard
		}
		left = r.state.revoke(st)
		return nil
	})
	return left, err
}

// SetPermits implements store.PermitSetter.
func (s *Store) SetPermits(ctx context.Context, name string, n int) (before, held int, err error) {
	err = s.one(ctx, name, true, func(r *row, st *step) error {
		var err error
		before, held, err = r.state.setPermits(st, n)
		return err
	})
	return before, held, err
}
