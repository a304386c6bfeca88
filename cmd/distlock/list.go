package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

var listCommand = &command{
	name:     "list",
	synopsis: "[flags] [PATTERN]",
	summary:  "list the locks that are held, with their holders and TTLs",
	doc: `List prints a table of the locks that are held now whose names match the
glob PATTERN (default "*": all), with their kinds, holders, remaining
leases, fencing tokens and waiters (for a fair-mutex, an rwmutex or a
semaphore, the length of its queue; for an election, its candidates). It
finds them with SCAN, never KEYS, so it does not block Redis, but a lock
taken or released while it runs may or may not be listed. Only locks
under --prefix are listed.

KIND is the kind of lock, as the library and "distlock status" name it.
A mutex's is "mutex" or "fair-mutex". A read-write lock's is
"rwmutex" followed by its mode: "rwmutex write" while a writer holds it
(run --exclusive), and "rwmutex read" while readers do (run --shared):
its HOLDER is then the reader, or how many readers there are, with the
earliest SINCE, the longest TTL and the highest TOKEN among them. A
semaphore's is "semaphore" followed by its permits in use and its
capacity ("semaphore 2/4"); its HOLDER is its holder, or how many
holders there are, as for readers. An election's is "election", and its
HOLDER is its leader.

With --json it prints a JSON array of objects with the fields described in
"distlock status --help".
`,
	examples: `  distlock list
  distlock list 'nightly-*'
  distlock list --json | jq -r '.[] | select(.holder.host == "web-1") | .name'
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addStoreFlags(fs)
		asJSON := fs.Bool("json", false, "print JSON")
		return func(line commandLine) error {
			pattern := "*"
			switch len(line.args) {
			case 0:
			case 1:
				pattern = line.args[0]
			default:
				return usageErrorf("want at most one PATTERN (see distlock list --help)")
			}
			return list(rf, pattern, *asJSON)
		}
	},
}

// list prints the locks that match pattern.
func list(rf *storeFlags, pattern string, asJSON bool) error {
	ctx := context.Background()
	s, err := newSession(rf)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.ready(ctx, nil); err != nil {
		return err
	}
	names, err := s.client.List(ctx, pattern)
	if err != nil {
		return s.failure(err)
	}
	states := make([]lockState, 0, len(names))
	for _, name := range names {
		v, err := s.inspect(ctx, name)
		if err != nil {
			return s.failure(err)
		}
		if v.locked() { // else released since the scan
			states = append(states, newLockState(v))
		}
	}
	if asJSON {
		return writeJSON(os.Stdout, states)
	}
	writeTable(os.Stdout, states)
	return nil
}

// writeTable prints locks as a table, one per line.
func writeTable(w io.Writer, states []lockState) {
	rows := [][]string{{"NAME", "KIND", "HOLDER", "SINCE", "TTL", "TOKEN", "WAITERS"}}
	for _, st := range states {
		kind, holder, since, ttl, token := st.Kind, "", time.Time{}, st.TTLMillis, st.Token
		switch {
		case st.Holder != nil:
			holder, since = fmt.Sprintf("%s/%d", st.Holder.Host, st.Holder.PID), st.Holder.Since
		case len(st.Readers) == 1:
			r := st.Readers[0]
			holder, since, ttl, token = fmt.Sprintf("%s/%d", r.Host, r.PID), r.Since, r.TTLMillis, r.Token
		case len(st.Readers) > 1:
			holder = plural(len(st.Readers), "reader")
			since, ttl, token = holdersSpan(len(st.Readers), func(i int) (time.Time, int64, uint64) {
				return st.Readers[i].Since, st.Readers[i].TTLMillis, st.Readers[i].Token
			})
		case len(st.Holders) == 1:
			h := st.Holders[0]
			holder, since, ttl, token = fmt.Sprintf("%s/%d", h.Host, h.PID), h.Since, h.TTLMillis, h.Token
		default:
			holder = plural(len(st.Holders), "holder")
			since, ttl, token = holdersSpan(len(st.Holders), func(i int) (time.Time, int64, uint64) {
				return st.Holders[i].Since, st.Holders[i].TTLMillis, st.Holders[i].Token
			})
		}
		switch {
		case st.Mode != "":
			kind = st.Kind + " " + st.Mode // "rwmutex write", "rwmutex read"
		case st.Kind == kindSemaphore.String():
			kind = fmt.Sprintf("%s %d/%d", st.Kind, st.InUse, st.Capacity)
		case kind == "":
			kind = "-" // taken between the reads of its kind and state (see session.inspect)
		}
		waiters := st.Waiters
		if st.Kind != kindMutex.String() {
			waiters = st.Queued // a fair-mutex's, an rwmutex's or a semaphore's waiters are in its queue
		}
		rows = append(rows, []string{printableName(st.Name), kind, holder, since.Local().Format("2006-01-02 15:04:05"),
			formatTTL(msDuration(ttl)), strconv.FormatUint(token, 10), strconv.Itoa(waiters)})
	}
	_ = writeColumns(w, rows)
}

// holdersSpan sums up the n holders of a lock held by several (the
// readers of an rwmutex in read mode, the holders of a semaphore), where
// at(i) is when holder i took the lock, its remaining lease and its
// token: the earliest time, the longest lease and the highest token.
func holdersSpan(n int, at func(i int) (time.Time, int64, uint64)) (since time.Time, ttlMillis int64, token uint64) {
	for i := range n {
		s, ttl, tok := at(i)
		if i == 0 || s.Before(since) {
			since = s
		}
		ttlMillis, token = max(ttlMillis, ttl), max(token, tok)
	}
	return since, ttlMillis, token
}
