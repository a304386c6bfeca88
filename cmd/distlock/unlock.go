package main

import (
	"context"
	"flag"
	"fmt"
	"os"
)

var unlockCommand = &command{
	name:     "unlock",
	synopsis: "--force [flags] NAME",
	summary:  "release a lock whoever holds it (operators only)",
	doc: `Unlock --force deletes the lock NAME whoever holds it, and wakes the
processes waiting for it. It is for operators, to free a lock whose
holder is stuck. The holder is not stopped: it learns of the release only
at its next lease renewal (within a third of its TTL), when "distlock run"
stops its command; until then two processes may both believe they hold
the lock. Fencing tokens protect the resources that check them.

Unlock refuses to run without --force (exit status 64). Unlocking a lock
that is not held is not an error.
`,
	examples: `  distlock status nightly-report     # see who holds it first
  distlock unlock --force nightly-report
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addRedisFlags(fs)
		force := fs.Bool("force", false, "really release the lock")
		return func(line commandLine) error {
			if len(line.args) != 1 {
				return usageErrorf("want one lock NAME (see distlock unlock --help)")
			}
			if !*force {
				return usageErrorf("refusing to release %q without --force: its holder keeps running (see distlock unlock --help)", line.args[0])
			}
			return forceUnlock(rf, line.args[0])
		}
	},
}

// forceUnlock releases the lock name whoever holds it.
func forceUnlock(rf *redisFlags, name string) error {
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
	// The holder is read first only to say whom the lock was taken from.
	info, err := m.Inspect(ctx)
	if err != nil {
		return s.failure(err)
	}
	held, err := m.ForceUnlock(ctx)
	if err != nil {
		return s.failure(err)
	}
	switch {
	case !held:
		fmt.Fprintf(os.Stdout, "%s was not locked\n", name)
	case info.Locked:
		fmt.Fprintf(os.Stdout, "released %s (was held by %s, token %d)\n", name, holderString(info.Holder), info.Token)
	default:
		fmt.Fprintf(os.Stdout, "released %s\n", name)
	}
	return nil
}
