package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock"
)

var statusCommand = &command{
	name:     "status",
	synopsis: "[flags] NAME",
	summary:  "show who holds a lock, since when, for how long, and who waits",
	doc: `Status shows the state of the lock NAME: whether it is locked and, if so,
its kind, as the library names it (mutex, as "distlock run" takes it;
fair-mutex, as "run --fair" does; rwmutex, a read-write lock, as
"run --shared" and "run --exclusive" do; semaphore, as "run --semaphore"
does; or election, as programs that use the library's Client.Election
do), its holder (id, host, process id, since when), the holder's hold
count, the remaining lease (TTL) and the holder's fencing token; and,
locked or not, the last fencing token issued for NAME and how many wait
for it: for a fair-mutex, the length of its queue.

A read-write lock (rwmutex) is held in one of two modes: read, by any
number of readers ("run --shared" takes its read side), or write, by one
writer ("run --exclusive" takes its write side). Status shows the mode,
the writer or each reader (with its own lease and token), and how many
readers and writers are queued.

A semaphore is held by any number of holders, each with its own permits,
lease and token. Status shows its capacity (the number of permits in
force, kept in Redis), the permits in use, each holder, and how many
wait in its queue for how many permits. For a free name, it shows the
capacity that Redis still keeps for the next semaphore of that name, if
any.

An election is held by its leader: status shows it as a mutex's holder,
with the value it campaigned with (an address, say); its token is the
leader's term. The candidates that wait to lead are queued.

Whatever its state, status shows the last run of NAME that "run
--once-per" (or the library's Once or OncePer) recorded, if Redis still
keeps it: by whom (host/pid), when it ended, its token, its period (with
--once-per: the number i of the period [i*PERIOD, (i+1)*PERIOD) since
the Unix epoch, on the Redis server's clock) and how it ended.

With --json it prints one JSON object with these fields, which are
stable. The values of kind and mode changed in this version to the
library's names: kind "plain", "fair" and "read-write" became "mutex",
"fair-mutex" and "rwmutex"; mode "exclusive" and "shared" became "write"
and "read".

  name        string   the lock name
  kind        string   the kind of lock, as the library names it:
                       "mutex", "fair-mutex", "rwmutex", "semaphore" or
                       "election"; "" when the lock is free and nobody is
                       queued: any kind may take it
  locked      bool     whether the lock is held
  mode        string   an rwmutex's mode: "write" while a writer holds
                       it, "read" while readers do; "" when it is free,
                       and for the other kinds
  holder      object   the holder (an election's leader), or null when
                       the lock is free (and when an rwmutex is held in
                       read mode, and for a semaphore: see readers and
                       holders):
    id        string     a digest of the owner (not a secret: it cannot
                         be used to release the lock)
    host      string     the holder's host name
    pid       number     the holder's process id
    since     string     when it took the lock (RFC 3339)
  holds       number   the holder's hold count; 0 when free
  ttl_ms      number   the remaining lease in milliseconds; 0 when free,
                       -1 if the key has no expiry
  token       number   the holder's fencing token (an election leader's
                       term); 0 when free
  last_token  number   the last fencing token issued for NAME; 0 if its
                       counter has expired
  waiters     number   processes waiting for a mutex; 0 for a
                       fair-mutex, an rwmutex or a semaphore, whose
                       waiters are counted in queued
  fair        bool     whether the lock is in use as a fair-mutex: held
                       as one, or with waiters in its queue
  queued      number   waiters in the queue of a fair-mutex, an rwmutex
                       or a semaphore, or candidates in an election's, in
                       every process; 0 for a mutex
  writer      object   an rwmutex's writer, or null: the fields of
                       holder, with its holds, ttl_ms and token
  readers     array    an rwmutex's readers, each like writer; empty
                       unless its mode is read
  queued_readers  number  readers in an rwmutex's queue
  queued_writers  number  writers in an rwmutex's queue
  capacity    number   a semaphore's number of permits in force, as
                       Redis keeps it; for a free name, the number Redis
                       keeps for the next semaphore of that name; else 0
  in_use      number   the permits of a semaphore that are held
  holders     array    a semaphore's holders, each with the fields of
                       holder, with its permits, ttl_ms and token
  queued_permits  number  the permits that a semaphore's queue waits for
  value       string   the value an election's leader campaigned with;
                       "" for the other kinds
  last_run    object   the last recorded run of NAME as a job that runs
                       once (run --once-per), or null if there is none
                       (and in list --json, which does not read it):
    host      string     the host it ran on
    pid       number     its process id
    ended     string     when it ended (RFC 3339, by that host's clock)
    token     number     the fencing token it ran with
    period    number     the period it ran for (--once-per); 0 for a
                         job that runs once per key (the library's Once)
    error     string     how it failed ("exit status 3"); "" if it
                         succeeded

The exit status is 0 whether the lock is held or not.

With --watch, status shows the state again every --interval (2s) until
it is interrupted (^C, or SIGTERM), and then exits with 0. On a terminal
each state replaces the last one on the screen; otherwise the states
follow each other, each text one after a blank line, the JSON ones as a
stream of objects (jq reads them one by one). A text state starts with
the line "Every 2s: distlock status NAME  TIME". A store that cannot be
read at the start ends the watch with the status that status exits
with; a failed refresh later is reported on stderr, and the watch goes
on.
`,
	examples: `  distlock status nightly-report
  distlock status --watch --interval 1s deploy
  distlock status --json nightly-report | jq -r .holder.host
  distlock status --json dataset | jq -r '.readers[].host'
  distlock status --json partner-api | jq '.capacity - .in_use'
  distlock status --json scheduler | jq -r .value
  distlock status --json nightly-report | jq -r '.last_run.ended // "never"'
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addStoreFlags(fs)
		asJSON := fs.Bool("json", false, "print JSON (see above)")
		watch := fs.Bool("watch", false,
			"show the state again every --interval until interrupted (^C, status 0):\n"+
				"redrawn in place on a terminal, one state after another otherwise")
		every := fs.Duration("interval", defaultWatchInterval,
			"with --watch: show the state every `DURATION` (100ms to 1h)")
		return func(line commandLine) error {
			switch {
			case len(line.args) != 1:
				return usageErrorf("want one lock NAME (see distlock status --help)")
			case isSet(fs, "interval") && !*watch:
				return usageErrorf("--interval is for --watch: add --watch, or drop --interval")
			case *every < minWatchInterval || *every > maxWatchInterval:
				return usageErrorf("invalid value for --interval: %v is not between %v and %v", *every, minWatchInterval, maxWatchInterval)
			}
			if err := checkName(line.args[0]); err != nil {
				return err
			}
			if *watch {
				return watchStatus(rf, line.args[0], *asJSON, *every)
			}
			return status(rf, line.args[0], *asJSON)
		}
	},
}

// The default and the range of status --interval.
const (
	defaultWatchInterval = 2 * time.Second
	minWatchInterval     = 100 * time.Millisecond
	maxWatchInterval     = time.Hour
)

// watchTimeout bounds each refresh of status --watch.
const watchTimeout = 10 * time.Second

// status prints the state of the lock name.
func status(rf *storeFlags, name string, asJSON bool) error {
	ctx := context.Background()
	s, err := newSession(rf)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.ready(ctx, s.client.Mutex(name)); err != nil {
		return err
	}
	return s.writeState(ctx, os.Stdout, name, asJSON)
}

// writeState writes the state of the lock name to w: as status prints
// it, or in JSON.
func (s *session) writeState(ctx context.Context, w io.Writer, name string, asJSON bool) error {
	v, err := s.inspect(ctx, name)
	if err != nil {
		return s.failure(err)
	}
	var last *distlock.Run
	run, ok, err := s.client.LastRun(ctx, name)
	switch {
	case err != nil && !errors.Is(err, distlock.ErrUnsupported): // Redlock keeps no records
		return s.failure(err)
	case ok:
		last = &run
	}
	if asJSON {
		st := newLockState(v)
		st.LastRun = newRunState(last)
		return writeJSON(w, st)
	}
	writeStatus(w, v, last)
	return nil
}

// watchStatus prints the state of the lock name every interval until
// SIGINT or SIGTERM, and then returns nil. On a terminal each state
// replaces the last one on the screen (cursor home, each line cleared to
// its end, the rest of the screen cleared); otherwise the states follow
// each other, the text ones each after a blank line, the JSON ones as a
// stream of objects. Each text state starts with a header line that
// says when it was read. A failure to read the first state ends the
// watch as it ends status; a later one is reported on stderr, and the
// watch goes on.
func watchStatus(rf *storeFlags, name string, asJSON bool, interval time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := newSession(rf)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.ready(ctx, s.client.Mutex(name)); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	tty := isTerminal(1)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		var state bytes.Buffer
		if !asJSON {
			fmt.Fprintf(&state, "Every %v: distlock status %s  %s\n\n", interval, name, time.Now().Format(time.RFC3339))
		}
		rctx, cancel := context.WithTimeout(ctx, watchTimeout)
		err := s.writeState(rctx, &state, name, asJSON)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && n == 0:
			return err
		case err != nil:
			fmt.Fprintf(os.Stderr, "distlock status: %s\n", oneLine(trimLibrary(err.Error())))
		default:
			os.Stdout.Write(screen(state.String(), tty, n == 0))
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil
		}
	}
}

// screen is what status --watch writes to show the state, text: on a
// terminal, text over the last state, from the top of the screen, with
// the rest of each line and of the screen cleared; otherwise text as it
// is, after a blank line unless it is the first.
func screen(text string, tty, first bool) []byte {
	var b bytes.Buffer
	switch {
	case tty:
		b.WriteString("\x1b[H") // cursor home
		for line := range strings.Lines(text) {
			b.WriteString(strings.TrimSuffix(line, "\n"))
			b.WriteString("\x1b[K\n") // clear to the end of the line
		}
		b.WriteString("\x1b[J") // clear the rest of the screen
	case !first:
		b.WriteString("\n")
		fallthrough
	default:
		b.WriteString(text)
	}
	return b.Bytes()
}

// writeStatus prints the state v, and the last run of the lock's name as
// a job that runs once if there is one, as aligned "field: value" lines.
func writeStatus(w io.Writer, v lockView, last *distlock.Run) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	defer tw.Flush()
	switch v.kind {
	case kindRWMutex:
		writeRWStatus(tw, v.rw)
	case kindSemaphore:
		writeSemStatus(tw, v.sem)
	default:
		writeMutexStatus(tw, v)
	}
	if last != nil {
		fmt.Fprintf(tw, "last run:\t%s\n", describeRun(*last))
	}
}

// describeRun describes a recorded run: "web-1/4242, ended
// 2026-11-24T21:20:03Z (1m2s ago), token 1795555189194255, period
// 5985184, failed: exit status 3"; a run of Once has no period.
func describeRun(run distlock.Run) string {
	s := fmt.Sprintf("%s, ended %s (%s ago), token %d", holderString(run.By), run.At.Format(time.RFC3339), formatAge(run.At), run.Token)
	if run.Period != 0 {
		s += fmt.Sprintf(", period %d", run.Period)
	}
	return s + ", " + outcome(run)
}

// writeMutexStatus prints the state v of a mutex (or fair-mutex), an
// election, or a free name.
func writeMutexStatus(w io.Writer, v lockView) {
	info := v.mutex
	fmt.Fprintf(w, "name:\t%s\n", info.Name)
	state := "free"
	if info.Locked {
		state = "locked"
	}
	fmt.Fprintf(w, "state:\t%s\n", state)
	if v.kind != kindNone {
		fmt.Fprintf(w, "kind:\t%s\n", v.kind)
	}
	switch {
	case info.Locked && v.kind == kindElection:
		writeHolder(w, "leader", info.Holder, info.Holds, info.TTL, info.Token)
		fmt.Fprintf(w, "value:\t%q\n", v.value)
	case info.Locked:
		writeHolder(w, "holder", info.Holder, info.Holds, info.TTL, info.Token)
	}
	fmt.Fprintf(w, "last token:\t%d\n", info.LastToken)
	if v.kind == kindFairMutex || v.kind == kindElection {
		fmt.Fprintf(w, "queued:\t%d\n", info.Queued)
	} else {
		fmt.Fprintf(w, "waiters:\t%d\n", info.Waiters)
	}
	if v.kind == kindNone && v.sem.Capacity != 0 {
		fmt.Fprintf(w, "capacity:\t%d (kept in Redis for the next semaphore of this name)\n", v.sem.Capacity)
	}
}

// writeSemStatus prints the state of a semaphore: its capacity, the
// permits in use, its holders, one line each, and its queue.
func writeSemStatus(w io.Writer, info distlock.SemaphoreInfo) {
	fmt.Fprintf(w, "name:\t%s\n", info.Name)
	state := "free"
	if len(info.Holders) > 0 {
		state = "locked"
	}
	fmt.Fprintf(w, "state:\t%s\n", state)
	fmt.Fprintf(w, "kind:\t%s\n", kindSemaphore)
	if info.Capacity != 0 {
		fmt.Fprintf(w, "capacity:\t%d\n", info.Capacity)
	} else {
		fmt.Fprintf(w, "capacity:\tnone (expired)\n")
	}
	fmt.Fprintf(w, "in use:\t%d\n", permitsHeld(info))
	fmt.Fprintf(w, "holders:\t%d\n", len(info.Holders))
	for _, h := range info.Holders {
		fmt.Fprintf(w, "holder:\t%s (id %s), since %s (%s ago), permits %d, ttl %s, token %d%s\n",
			holderString(h.Holder), h.ID, h.Since.Format(time.RFC3339), formatAge(h.Since),
			h.Permits, formatTTL(h.TTL), h.Token, revokedNote(h.Holder))
	}
	fmt.Fprintf(w, "last token:\t%d\n", info.LastToken)
	if info.Queued == 0 {
		fmt.Fprintf(w, "queued:\t0\n")
	} else {
		fmt.Fprintf(w, "queued:\t%d, for %s\n", info.Queued, plural(info.QueuedPermits, "permit"))
	}
}

// writeRWStatus prints the state of a read-write lock: its writer, in
// the lines of a mutex's holder, or its readers, one line each.
func writeRWStatus(w io.Writer, info distlock.RWLockInfo) {
	fmt.Fprintf(w, "name:\t%s\n", info.Name)
	state := "free"
	if info.Mode != "" {
		state = "locked"
	}
	fmt.Fprintf(w, "state:\t%s\n", state)
	fmt.Fprintf(w, "kind:\t%s\n", kindRWMutex)
	if info.Mode != "" {
		fmt.Fprintf(w, "mode:\t%s\n", info.Mode)
	}
	if h := info.Writer; h != nil {
		writeHolder(w, "writer", h.Holder, h.Holds, h.TTL, h.Token)
	}
	if len(info.Readers) > 0 {
		fmt.Fprintf(w, "readers:\t%d\n", len(info.Readers))
	}
	for _, h := range info.Readers {
		fmt.Fprintf(w, "reader:\t%s (id %s), since %s (%s ago), holds %d, ttl %s, token %d%s\n",
			holderString(h.Holder), h.ID, h.Since.Format(time.RFC3339), formatAge(h.Since),
			h.Holds, formatTTL(h.TTL), h.Token, revokedNote(h.Holder))
	}
	fmt.Fprintf(w, "last token:\t%d\n", info.LastToken)
	fmt.Fprintf(w, "queued:\t%s, %s\n", plural(info.QueuedReaders, "reader"), plural(info.QueuedWriters, "writer"))
}

// writeHolder prints the lines that describe the one owner that holds a
// lock: a mutex's holder, or a read-write lock's writer.
func writeHolder(w io.Writer, role string, h distlock.Holder, holds int, ttl time.Duration, token uint64) {
	fmt.Fprintf(w, "%s:\t%s (id %s)\n", role, holderString(h), h.ID)
	fmt.Fprintf(w, "since:\t%s (%s ago)\n", h.Since.Format(time.RFC3339), formatAge(h.Since))
	fmt.Fprintf(w, "holds:\t%d\n", holds)
	fmt.Fprintf(w, "ttl:\t%s\n", formatTTL(ttl))
	fmt.Fprintf(w, "token:\t%d\n", token)
	if h.Revoked {
		fmt.Fprintf(w, "revoked:\tyes: the holder is told to stop; the lock ends with its release or its lease\n")
	}
}

// revokedNote is what a one-line description of h ends with: ", revoked"
// if the lock was revoked from h, nothing otherwise.
func revokedNote(h distlock.Holder) string {
	if h.Revoked {
		return ", revoked"
	}
	return ""
}

// lockState is the JSON form of a lock's state, printed by status --json
// and list --json. Its field names are part of distlock's interface.
type lockState struct {
	Name          string           `json:"name"`
	Kind          string           `json:"kind"`
	Locked        bool             `json:"locked"`
	Mode          string           `json:"mode"`
	Holder        *holderState     `json:"holder"`
	Holds         int              `json:"holds"`
	TTLMillis     int64            `json:"ttl_ms"`
	Token         uint64           `json:"token"`
	LastToken     uint64           `json:"last_token"`
	Waiters       int              `json:"waiters"`
	Fair          bool             `json:"fair"`
	Queued        int              `json:"queued"`
	Writer        *rwHolderState   `json:"writer"`
	Readers       []rwHolderState  `json:"readers"`
	QueuedReaders int              `json:"queued_readers"`
	QueuedWriters int              `json:"queued_writers"`
	Capacity      int              `json:"capacity"`
	InUse         int              `json:"in_use"`
	Holders       []semHolderState `json:"holders"`
	QueuedPermits int              `json:"queued_permits"`
	Value         string           `json:"value"`
	LastRun       *runState        `json:"last_run"`
}

// runState is the JSON form of the recorded run of a job that runs once.
type runState struct {
	Host   string    `json:"host"`
	PID    int       `json:"pid"`
	Ended  time.Time `json:"ended"`
	Token  uint64    `json:"token"`
	Period uint64    `json:"period"`
	Error  string    `json:"error"`
}

// newRunState is the JSON form of run, nil for none.
func newRunState(run *distlock.Run) *runState {
	if run == nil {
		return nil
	}
	st := &runState{Host: run.By.Host, PID: run.By.PID, Ended: run.At.UTC(), Token: run.Token, Period: run.Period}
	if run.Err != nil {
		st.Error = run.Err.Error()
	}
	return st
}

// holderState is the JSON form of a lock's holder.
type holderState struct {
	ID    string    `json:"id"`
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	Since time.Time `json:"since"`
	// Revoked: unlock --force revoked the lock; it ends with this
	// holder's release or lease.
	Revoked bool `json:"revoked"`
}

// rwHolderState is the JSON form of a read-write lock's writer or reader:
// each has its own lease and token.
type rwHolderState struct {
	holderState
	Holds     int    `json:"holds"`
	TTLMillis int64  `json:"ttl_ms"`
	Token     uint64 `json:"token"`
}

// semHolderState is the JSON form of a semaphore's holder: each has its
// own permits, lease and token.
type semHolderState struct {
	holderState
	Permits   int    `json:"permits"`
	TTLMillis int64  `json:"ttl_ms"`
	Token     uint64 `json:"token"`
}

// newHolderState is the JSON form of h.
func newHolderState(h distlock.Holder) *holderState {
	return &holderState{ID: h.ID, Host: h.Host, PID: h.PID, Since: h.Since.UTC(), Revoked: h.Revoked}
}

// newRWHolderState is the JSON form of a read-write lock's writer or
// reader h.
func newRWHolderState(h distlock.RWHolder) rwHolderState {
	return rwHolderState{holderState: *newHolderState(h.Holder), Holds: h.Holds, TTLMillis: ttlMillis(h.TTL), Token: h.Token}
}

// ttlMillis is a remaining lease in milliseconds, -1 for none.
func ttlMillis(ttl time.Duration) int64 {
	if ttl < 0 {
		return -1
	}
	return ttl.Milliseconds()
}

// newLockState is the JSON form of the state v.
func newLockState(v lockView) lockState {
	switch v.kind {
	case kindRWMutex:
		return newRWLockState(v.rw)
	case kindSemaphore:
		return newSemLockState(v.sem)
	}
	info := v.mutex
	st := lockState{
		Name: info.Name, Kind: v.kind.String(), Locked: info.Locked, LastToken: info.LastToken,
		Waiters: info.Waiters, Fair: v.kind == kindFairMutex, Queued: info.Queued, Readers: []rwHolderState{},
		Holders: []semHolderState{},
	}
	switch v.kind {
	case kindNone:
		st.Capacity = v.sem.Capacity // kept for the next semaphore of the name
	case kindElection:
		st.Value = v.value
	}
	if info.Locked {
		st.Holder = newHolderState(info.Holder)
		st.Holds, st.Token, st.TTLMillis = info.Holds, info.Token, ttlMillis(info.TTL)
	}
	return st
}

// newRWLockState is the JSON form of a read-write lock's state. Its
// writer is also its holder, as a mutex's.
func newRWLockState(info distlock.RWLockInfo) lockState {
	st := lockState{
		Name: info.Name, Kind: kindRWMutex.String(), Locked: info.Mode != "", Mode: info.Mode, LastToken: info.LastToken,
		Queued: info.QueuedReaders + info.QueuedWriters, Readers: []rwHolderState{},
		QueuedReaders: info.QueuedReaders, QueuedWriters: info.QueuedWriters, Holders: []semHolderState{},
	}
	if h := info.Writer; h != nil {
		w := newRWHolderState(*h)
		st.Writer = &w
		st.Holder = &w.holderState
		st.Holds, st.TTLMillis, st.Token = w.Holds, w.TTLMillis, w.Token
	}
	for _, h := range info.Readers {
		st.Readers = append(st.Readers, newRWHolderState(h))
	}
	return st
}

// newSemLockState is the JSON form of a semaphore's state. It has no
// single holder: its holders are in Holders.
func newSemLockState(info distlock.SemaphoreInfo) lockState {
	st := lockState{
		Name: info.Name, Kind: kindSemaphore.String(), Locked: len(info.Holders) > 0, LastToken: info.LastToken,
		Queued: info.Queued, Readers: []rwHolderState{}, Capacity: info.Capacity, InUse: permitsHeld(info),
		Holders: []semHolderState{}, QueuedPermits: info.QueuedPermits,
	}
	for _, h := range info.Holders {
		st.Holders = append(st.Holders, semHolderState{holderState: *newHolderState(h.Holder),
			Permits: h.Permits, TTLMillis: ttlMillis(h.TTL), Token: h.Token})
	}
	return st
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
