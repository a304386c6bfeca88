package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/distlock/distlock"
)

// supervise waits for the command j, run under the lock name, to exit.
// Meanwhile it passes the signals received on sigs on to the command and,
// if the lock is lost (lease, the context of its Lease, ends), stops the
// command: terminateSignal at once, SIGKILL after grace. It returns why the
// lock was lost, or nil if the command exited first.
func supervise(lease context.Context, j *job, name string, grace time.Duration, sigs <-chan os.Signal) (lost error) {
	leaseDone := lease.Done()
	var killNow <-chan time.Time
	for {
		select {
		case <-j.done:
			return lost
		case sig := <-sigs:
			if j.forwards(sig) {
				j.signal(sig)
			}
		case <-leaseDone:
			leaseDone = nil
			lost = context.Cause(lease)
			fmt.Fprintf(os.Stderr, "distlock run: lost lock %q: %s; stopping the command: %s now, SIGKILL after %v\n",
				name, lossReason(lost), terminateName, grace)
			j.signal(terminateSignal)
			t := time.NewTimer(grace)
			defer t.Stop()
			killNow = t.C
		case <-killNow:
			killNow = nil
			j.kill()
		}
	}
}

// lossReason says why a lock was lost, without the prefix of
// distlock.ErrLockLost.
func lossReason(err error) string {
	s := err.Error()
	if i := strings.Index(s, distlock.ErrLockLost.Error()+": "); i >= 0 {
		return s[i+len(distlock.ErrLockLost.Error())+2:]
	}
	return s
}
