package harness

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// What the bench commands share around their runs.

// Logf writes a line of progress to stderr, after the time of day.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

// StopOnSignalOrTimeout makes the process call stop (which stops the
// servers it started) and exit with status 1 at SIGINT or SIGTERM, or
// once timeout has passed, after a line that says why.
func StopOnSignalOrTimeout(timeout time.Duration, stop func()) {
	time.AfterFunc(timeout, func() { Logf("-timeout %v exceeded; stopping", timeout); stop(); os.Exit(1) })
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { s := <-sig; Logf("got %v; stopping", s); stop(); os.Exit(1) }()
}

// PinServers keeps the last CPU for the servers, as PinApart does, if
// pin, and returns the servers' CPUs: nil if not pinned.
func PinServers(pin bool) ([]int, error) {
	if !pin {
		return nil, nil
	}
	cpus, _, err := PinApart()
	return cpus, err
}

// Commit is distlock's commit as the reports state it: the short hash
// of the checkout around the working directory, bench/, with " with
// uncommitted library changes" if files outside bench/ and docs/ have
// changed; without git, the value of the environment variable env (set
// when running from a copy without .git), or "?".
func Commit(env string) string {
	rev := os.Getenv(env)
	if rev == "" {
		rev = "?"
	}
	if out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
		if out, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench", ":!docs").Output(); err == nil && len(out) > 0 {
			rev += " with uncommitted library changes"
		}
	}
	return rev
}
