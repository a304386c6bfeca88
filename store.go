package distlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/store"
)

// capability returns the Client's store as a T, one of the optional
// interfaces of package store, or an error wrapping ErrUnsupported that
// says the store cannot do what (for example "Inspect").
func capability[T any](c *Client, what string) (T, error) {
	if s, ok := c.store.(T); ok {
		return s, nil
	}
	var zero T
	return zero, fmt.Errorf("%w: %s: the store does not offer it", ErrUnsupported, what)
}

// nilStore stands for the nil store given to New: the Client fails every
// operation with ErrInvalidOption before it reaches the store.
type nilStore struct{}

var errNilStore = fmt.Errorf("%w: nil store", ErrInvalidOption)

func (nilStore) Acquire(context.Context, store.Request) (store.Grant, error) {
	return store.Grant{}, errNilStore
}

func (nilStore) AcquireAll(context.Context, []store.Request) ([]store.Grant, error) {
	return nil, errNilStore
}

func (nilStore) Release(context.Context, store.Request) (store.Release, error) {
	return store.NotOwner, errNilStore
}

func (nilStore) Abandon(context.Context, store.Request) (bool, error) { return false, errNilStore }

func (nilStore) Renew(_ context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	for i := range rs {
		report(i, store.Grant{}, errNilStore)
	}
}

func (nilStore) Watch(context.Context, string, store.Kind, func(store.Notice)) (func(), error) {
	return nil, errNilStore
}

func (nilStore) Close() error { return nil }
