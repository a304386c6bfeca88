package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock"
)

var statusCommand = &command{
	name:     "status",
	synopsis: "[flags] NAME",
	summary:  "show who holds a lock, since when, for how long, and who waits",
	doc: `Status shows the state of the lock NAME: whether it is locked and, if so,
its holder (id, host, process id, since when), the holder's hold count,
the remaining lease (TTL) and the holder's fencing token; and, locked or
not, the last fencing token issued for NAME and how many processes wait.

With --json it prints one JSON object with these fields, which are stable:

  name        string   the lock name
  locked      bool     whether the lock is held
  holder      object   the holder, or null when the lock is free:
    id        string     a digest of the owner (not a secret: it cannot
                         be used to release the lock)
    host      string     the holder's host name
    pid       number     the holder's process id
    since     string     when it took the lock (RFC 3339)
  holds       number   the holder's hold count; 0 when free
  ttl_ms      number   the remaining lease in milliseconds; 0 when free,
                       -1 if the key has no expiry
  token       number   the holder's fencing token; 0 when free
  last_token  number   the last fencing token issued for NAME; 0 if its
                       counter has expired
  waiters     number   processes waiting for the lock

The exit status is 0 whether the lock is held or not.
`,
	examples: `  distlock status nightly-report
  distlock status --json nightly-report | jq -r .holder.host
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addRedisFlags(fs)
		asJSON := fs.Bool("json", false, "print JSON (see above)")
		return func(line commandLine) error {
			if len(line.args) != 1 {
				return usageErrorf("want one lock NAME (see distlock status --help)")
			}
			return status(rf, line.args[0], *asJSON)
		}
	},
}

// status prints the state of the lock name.
func status(rf *redisFlags, name string, asJSON bool) error {
	ctx := context.Background()
	s, err := newSession(rf)
	if err != nil {
		return err
	}
	defer s.Close()
	m := s.client.Mutex(name)
	if err := s.ready(ctx, m); err != nil {
		return err
	}
	info, err := m.Inspect(ctx)
	if err != nil {
		return s.failure(err)
	}
	if asJSON {
		return writeJSON(os.Stdout, newLockState(info))
	}
	writeStatus(os.Stdout, info)
	return nil
}

// writeStatus prints info as aligned "field: value" lines.
func writeStatus(w io.Writer, info distlock.LockInfo) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "name:\t%s\n", info.Name)
	if !info.Locked {
		fmt.Fprintf(tw, "state:\tfree\n")
	} else {
		h := info.Holder
		fmt.Fprintf(tw, "state:\tlocked\n")
		fmt.Fprintf(tw, "holder:\t%s (id %s)\n", holderString(h), h.ID)
		fmt.Fprintf(tw, "since:\t%s (%s ago)\n", h.Since.Format(time.RFC3339), formatAge(h.Since))
		fmt.Fprintf(tw, "holds:\t%d\n", info.Holds)
		fmt.Fprintf(tw, "ttl:\t%s\n", formatTTL(info.TTL))
		fmt.Fprintf(tw, "token:\t%d\n", info.Token)
	}
	fmt.Fprintf(tw, "last token:\t%d\n", info.LastToken)
	fmt.Fprintf(tw, "waiters:\t%d\n", info.Waiters)
}

// lockState is the JSON form of a lock's state, printed by status --json
// and list --json. Its field names are part of distlock's interface.
type lockState struct {
	Name      string       `json:"name"`
	Locked    bool         `json:"locked"`
	Holder    *holderState `json:"holder"`
	Holds     int          `json:"holds"`
	TTLMillis int64        `json:"ttl_ms"`
	Token     uint64       `json:"token"`
	LastToken uint64       `json:"last_token"`
	Waiters   int          `json:"waiters"`
}

// holderState is the JSON form of a lock's holder.
type holderState struct {
	ID    string    `json:"id"`
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	Since time.Time `json:"since"`
}

func newLockState(info distlock.LockInfo) lockState {
	st := lockState{Name: info.Name, Locked: info.Locked, LastToken: info.LastToken, Waiters: info.Waiters}
	if info.Locked {
		h := info.Holder
		st.Holder = &holderState{ID: h.ID, Host: h.Host, PID: h.PID, Since: h.Since.UTC()}
		st.Holds, st.Token = info.Holds, info.Token
		st.TTLMillis = info.TTL.Milliseconds()
		if info.TTL < 0 {
			st.TTLMillis = -1
		}
	}
	return st
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
