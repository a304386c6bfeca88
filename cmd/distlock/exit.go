package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/distlock/distlock"
)

// Exit statuses. Those from 64 on follow sysexits.h, as cron jobs and
// service managers expect; 126 and 127 are those of the shells.
const (
	exitOK          = 0
	exitFailure     = 1   // any other failure
	exitUsage       = 64  // EX_USAGE: bad flags or arguments
	exitBadName     = 65  // EX_DATAERR: invalid lock name
	exitUnavailable = 69  // EX_UNAVAILABLE: Redis unreachable, failing or too old
	exitLockLost    = 70  // EX_SOFTWARE: the lock was lost while the command ran
	exitNotAcquired = 75  // EX_TEMPFAIL: the lock is held by someone else
	exitNoPerm      = 77  // EX_NOPERM: the store refused the user name or password, or a request
	exitWrongKind   = 78  // EX_CONFIG: the lock is in use as another kind, or a semaphore has fewer permits than asked for
	exitCannotExec  = 126 // the command is not executable
	exitNotFound    = 127 // the command was not found
	exitSignal      = 128 // plus the signal number: killed or interrupted by a signal
)

// exitStatusTable documents the exit statuses for the help texts.
const exitStatusTable = `  0      success; for run: the command succeeded, or (--once-per) it
         ran or runs elsewhere in this period
  1-125  for run: the exit status of the command
  1      any other error
  64     usage error: unknown flag, missing argument or "--", bad value;
         a kind of lock (--fair, ...) that the store does not support
  65     invalid lock name (empty, too long, braces, control characters,
         bidirectional controls)
  69     the store unavailable: unreachable, timed out, failing; Redis
         older than 6.2
  70     run: the lock was lost while the command ran; the command was stopped
  75     run: not acquired: the lock is held by someone else, or a
         semaphore's permits are taken (after --wait), or others queue
         for it (--wait 0 with --fair, --shared, --exclusive or
         --semaphore), or (--once-per, rarely) the lock kept changing
         hands while run looked for the run of the period
  77     the store refused the user name or password, or (etcd, SQL)
         a request to this user
  78     run, permits: the lock is in use as another kind (mutex,
         fair-mutex, rwmutex or semaphore): the users of a lock
         disagree on --fair, --shared, --exclusive and --semaphore; or
         run: the semaphore has fewer permits in Redis than --permits
  126    run: the command is not executable
  127    run: the command was not found
  128+N  run: the command was killed by signal N, or distlock was
         interrupted by signal N while waiting for the lock
`

// An exitError ends distlock with an exit status and, unless err is nil,
// a one-line message on stderr.
type exitError struct {
	status int
	err    error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.status)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitf returns an exitError with a formatted message.
func exitf(status int, format string, args ...any) error {
	return &exitError{status, fmt.Errorf(format, args...)}
}

// settled reports whether err needs no turning into an exitError: it is
// nil, or an exitError already.
func settled(err error) bool {
	var ee *exitError
	return err == nil || errors.As(err, &ee)
}

// usageErrorf returns a usage error (status 64).
func usageErrorf(format string, args ...any) error {
	return exitf(exitUsage, format, args...)
}

// silentExit ends distlock with status and no message.
func silentExit(status int) error {
	return &exitError{status: status}
}

// report prints err, if it has a message, as one line prefixed with
// prog, and returns the exit status it stands for.
func report(prog string, err error) int {
	if err == nil {
		return exitOK
	}
	status := exitStatus(err)
	var ee *exitError
	if errors.As(err, &ee) && ee.err == nil {
		return status
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", prog, oneLine(trimLibrary(err.Error())))
	return status
}

// libraryPrefix starts the message of every error the library returns
// (distlock: lock "x": not acquired: ...).
const libraryPrefix = "distlock: "

// trimLibrary drops the "distlock: " of the library's errors from msg,
// where they start it, follow the ": " of a message that wraps one, or
// start a line of joined errors: the command's own prefix ("distlock
// run: ") already says it.
func trimLibrary(msg string) string {
	msg = strings.TrimPrefix(msg, libraryPrefix)
	msg = strings.ReplaceAll(msg, ": "+libraryPrefix, ": ")
	return strings.ReplaceAll(msg, "\n"+libraryPrefix, "\n")
}

// detail is what the library's error err says after the message of the
// error it wraps, sentinel ("contains a brace" of `distlock: lock "a{":
// invalid lock name: contains a brace`), or else all of err's message
// but its "distlock: ".
func detail(err, sentinel error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, sentinel.Error()+": "); ok {
		return after
	}
	return trimLibrary(msg)
}

// exitStatus is the exit status for err.
func exitStatus(err error) int {
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.status
	case errors.Is(err, distlock.ErrInvalidOption):
		return exitUsage
	case errors.Is(err, distlock.ErrInvalidName):
		return exitBadName
	case isAuthError(err), isEtcdAuthError(err), sqlAuthKind(err) != sqlNotAuth:
		return exitNoPerm
	case errors.Is(err, distlock.ErrWrongKind):
		// Before ErrNotAcquired, which it wraps: the answer came from
		// Redis, which is available.
		return exitWrongKind
	case errors.Is(err, distlock.ErrBackend), errors.Is(err, distlock.ErrUnsupported),
		errors.Is(err, context.DeadlineExceeded):
		return exitUnavailable
	case errors.Is(err, distlock.ErrLockLost):
		return exitLockLost
	case errors.Is(err, distlock.ErrNotAcquired):
		return exitNotAcquired
	}
	return exitFailure
}

// oneLine joins the lines of a message, so that every error is reported
// on exactly one line.
func oneLine(s string) string {
	out := []rune(s)
	for i, r := range out {
		if r == '\n' || r == '\r' {
			out[i] = ' '
		}
	}
	return string(out)
}
