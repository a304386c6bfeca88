package main

import (
	"errors"
	"time"
)

// waitFlag is the value of run's --wait: how long to wait for the lock,
// forever unless set.
type waitFlag struct {
	d   time.Duration
	set bool
}

func (w *waitFlag) String() string {
	if w == nil || !w.set {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		*w = waitFlag{}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(`want a duration such as 0, 30s or 5m, or "forever"`)
	}
	if d < 0 {
		return errors.New("negative duration")
	}
	*w = waitFlag{d: d, set: true}
	return nil
}

// once reports whether the lock is to be tried only once.
func (w *waitFlag) once() bool { return w.set && w.d == 0 }
