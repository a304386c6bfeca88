package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

var listCommand = &command{
	name:     "list",
	synopsis: "[flags] [PATTERN]",
	summary:  "list the locks that are held, with their holders and TTLs",
	doc: `List prints a table of the locks that are held now whose names match the
glob PATTERN (default "*": all), with their holders, remaining leases,
fencing tokens and waiters. It finds them with SCAN, never KEYS, so it
does not block Redis, but a lock taken or released while it runs may or
may not be listed. Only locks under --prefix are listed.

With --json it prints a JSON array of objects with the fields described in
"distlock status --help".
`,
	examples: `  distlock list
  distlock list 'nightly-*'
  distlock list --json | jq -r '.[] | select(.holder.host == "web-1") | .name'
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addRedisFlags(fs)
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
func list(rf *redisFlags, pattern string, asJSON bool) error {
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
		info, err := s.client.Mutex(name).Inspect(ctx)
		if err != nil {
			return s.failure(err)
		}
		if info.Locked { // else released since the scan
			states = append(states, newLockState(info))
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
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "NAME\tHOLDER\tSINCE\tTTL\tTOKEN\tWAITERS")
	for _, st := range states {
		h := st.Holder
		fmt.Fprintf(tw, "%s\t%s/%d\t%s\t%s\t%d\t%d\n",
			st.Name, h.Host, h.PID, h.Since.Local().Format("2006-01-02 15:04:05"),
			formatTTL(msDuration(st.TTLMillis)), st.Token, st.Waiters)
	}
}
