package main

import (
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// holderString names the holder of a lock as "HOST/PID".
func holderString(h distlock.Holder) string {
	return fmt.Sprintf("%s/%d", h.Host, h.PID)
}

// formatTTL formats a remaining lease: to a tenth of a second below ten
// seconds, to the second above.
func formatTTL(d time.Duration) string {
	switch {
	case d < 0:
		return "no expiry"
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// formatAge formats how long ago t was, to the second.
func formatAge(t time.Time) string {
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		d = 0 // the Redis server's clock is ahead of ours
	}
	return d.String()
}

// msDuration converts milliseconds to a Duration.
func msDuration(ms int64) time.Duration {
	return time.Duration(ms) * time.Millisecond
}
