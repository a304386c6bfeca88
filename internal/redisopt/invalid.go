package redisopt

import (
	"context"
	"time"

	"github.com/distlock/distlock/store"
)

// invalid is the store of a constructor given invalid arguments: every
// request fails with err, which a Client reports before any request
// (store.Validator).
type invalid struct{ err error }

// Invalid returns the store of a constructor given invalid arguments:
// every request fails with err.
func Invalid(err error) store.Store { return invalid{err} }

func (s invalid) Err() error                                              { return s.err }
func (s invalid) Validate(store.Kind, time.Duration, time.Duration) error { return s.err }
func (s invalid) Close() error                                            { return nil }

func (s invalid) Acquire(context.Context, store.Request) (store.Grant, error) {
	return store.Grant{}, s.err
}

func (s invalid) AcquireAll(context.Context, []store.Request) ([]store.Grant, error) {
	return nil, s.err
}

func (s invalid) Release(context.Context, store.Request) (store.Release, error) {
	return store.NotOwner, s.err
}

func (s invalid) Abandon(context.Context, store.Request) (bool, error) { return false, s.err }

func (s invalid) Renew(_ context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	for i := range rs {
		report(i, store.Grant{}, s.err)
	}
}

func (s invalid) Watch(context.Context, string, store.Kind, func(store.Notice)) (func(), error) {
	return nil, s.err
}
