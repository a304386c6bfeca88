package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Progress of a wait for a lock.
const (
	// progressPoll is how often the holder is looked up while waiting.
	progressPoll = time.Second
	// progressQuiet is the least time between two plain progress lines,
	// and progressRepeat the most, when stderr is not a terminal.
	progressQuiet  = 5 * time.Second
	progressRepeat = time.Minute
)

// showProgress reports on stderr, once waiting is signalled and until ctx
// ends, who holds the lock l that distlock waits for and who else waits
// for it: for a fair lock, how many are in its queue; for a read-write
// lock, whether it is held shared or exclusively, and how many readers
// and writers are in its queue. On a terminal it keeps one line up to
// date, and erases it at the end. Otherwise it prints a plain line when
// the wait starts, then when the holders change (at most every 5 seconds)
// and at least every minute.
func showProgress(ctx context.Context, l locker, waiting <-chan struct{}) {
	select {
	case <-waiting:
	case <-ctx.Done():
		return
	}
	tty := isTerminal(2)
	start := time.Now()
	var shown bool
	var lastHolders string
	var lastLine time.Time
	tick := time.NewTicker(progressPoll)
	defer tick.Stop()
	for {
		d, err := l.describe(ctx)
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			line := waitingLine(d, time.Since(start))
			switch {
			case tty:
				fmt.Fprintf(os.Stderr, "\r%s\x1b[K", line)
				shown = true
			case lastLine.IsZero() ||
				d.id != lastHolders && time.Since(lastLine) >= progressQuiet ||
				time.Since(lastLine) >= progressRepeat:
				fmt.Fprintf(os.Stderr, "distlock run: %s\n", line)
				lastHolders, lastLine = d.id, time.Now()
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	if shown {
		fmt.Fprint(os.Stderr, "\r\x1b[K")
	}
}

// waitingLine describes a wait for a lock: "waiting for deploy (12s),
// held by web-1/4242, ttl 18s, 3 queued". The queue counts this waiter
// too.
func waitingLine(d lockDesc, waited time.Duration) string {
	w := waited.Round(time.Second)
	if d.free {
		return fmt.Sprintf("waiting for %s (%v): %s", d.name, w, d.progress())
	}
	return fmt.Sprintf("waiting for %s (%v), %s", d.name, w, d.progress())
}
