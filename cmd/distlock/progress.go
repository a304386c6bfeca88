package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/distlock/distlock"
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
// ends, who holds the lock m that distlock waits for. On a terminal it
// keeps one line up to date, and erases it at the end. Otherwise it prints
// a plain line when the wait starts, then when the holder changes (at most
// every 5 seconds) and at least every minute.
func showProgress(ctx context.Context, m *distlock.Mutex, waiting <-chan struct{}) {
	select {
	case <-waiting:
	case <-ctx.Done():
		return
	}
	tty := isTerminal(2)
	start := time.Now()
	var shown bool
	var lastHolder string
	var lastLine time.Time
	tick := time.NewTicker(progressPoll)
	defer tick.Stop()
	for {
		info, err := m.Inspect(ctx)
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			line := waitingLine(info, time.Since(start))
			switch {
			case tty:
				fmt.Fprintf(os.Stderr, "\r%s\x1b[K", line)
				shown = true
			case lastLine.IsZero() ||
				info.Holder.ID != lastHolder && time.Since(lastLine) >= progressQuiet ||
				time.Since(lastLine) >= progressRepeat:
				fmt.Fprintf(os.Stderr, "distlock run: %s\n", line)
				lastHolder, lastLine = info.Holder.ID, time.Now()
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

// waitingLine describes a wait for a lock.
func waitingLine(info distlock.LockInfo, waited time.Duration) string {
	w := waited.Round(time.Second)
	if !info.Locked {
		return fmt.Sprintf("waiting for %s (%v): it is free, acquiring", info.Name, w)
	}
	return fmt.Sprintf("waiting for %s (%v), held by %s, ttl %s",
		info.Name, w, holderString(info.Holder), formatTTL(info.TTL))
}
