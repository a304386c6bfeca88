package harness

import (
	"io"
	"sync"
)

// OpenAll calls open n times and returns what it opened; on an error it
// closes those and returns the error.
func OpenAll[T io.Closer](n int, open func() (T, error)) ([]T, error) {
	var cs []T
	for range n {
		c, err := open()
		if err != nil {
			CloseAll(cs)
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// OpenEach calls open n times for each of from, in order, and returns
// what it opened; on an error it closes those and returns the error.
func OpenEach[S any, T io.Closer](from []S, n int, open func(S) (T, error)) ([]T, error) {
	var all []T
	for _, x := range from {
		cs, err := OpenAll(n, func() (T, error) { return open(x) })
		if err != nil {
			CloseAll(all)
			return nil, err
		}
		all = append(all, cs...)
	}
	return all, nil
}

// CloseAll closes each of cs, ignoring errors.
func CloseAll[T io.Closer](cs []T) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// Each runs f for every element of xs, with its index, in a goroutine of
// its own, and returns the first error.
func Each[T any](xs []T, f func(i int, x T) error) error {
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for i, x := range xs {
		wg.Go(func() {
			if err := f(i, x); err != nil {
				once.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	return firstErr
}
