// Command distlock runs commands under distributed locks kept in Redis, and
// shows and manages those locks.
//
// Usage:
//
//	distlock run [flags] NAME -- COMMAND [ARGS...]
//	distlock status [flags] NAME
//	distlock list [flags] [PATTERN]
//	distlock unlock --force [flags] NAME
//	distlock permits [flags] NAME N
//	distlock demo [flags]
//	distlock help [COMMAND]
//	distlock --version
//
// The run command acquires the lock NAME, runs COMMAND while renewing the
// lock's lease, and releases the lock when COMMAND exits. COMMAND finds the
// lock's name and its fencing token in the environment variables
// DISTLOCK_NAME and DISTLOCK_TOKEN. If the lock is lost while COMMAND runs,
// COMMAND is stopped. Run with --wait 0 makes cron jobs scheduled on several
// machines run on only one of them: the others exit with status 75. Run
// with --fair serves the waiters of a lock, on every machine, in the order
// they arrived; with --shared and --exclusive it takes a side of a
// read-write lock; with --semaphore N, at most N commands run at once, on
// every machine together; with --once-per PERIOD, the command runs at
// most once per period on all machines together, whichever runs first.
// The permits command sets a semaphore's number of permits.
//
// Every command reads the Redis URL from --redis, else from $REDIS_URL, else
// uses redis://127.0.0.1:6379. See "distlock help COMMAND" for the flags of
// each command, and docs/cli.md for the exit statuses and recipes.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	os.Exit(runMain(os.Args[1:]))
}

// runMain runs the distlock command with the given arguments (without the
// program name) and returns its exit status.
func runMain(args []string) int {
	if len(args) == 0 {
		return report("distlock", usageErrorf("missing command: run, status, list, unlock, permits or demo (see distlock --help)"))
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return help(args[1:])
	case "-version", "--version", "version":
		fmt.Println("distlock", versionString())
		return exitOK
	}
	cmd := lookup(args[0])
	switch {
	case cmd == nil && strings.HasPrefix(args[0], "-"):
		return report("distlock", usageErrorf("unknown flag %s: flags go after the command, as in distlock run --wait 0 NAME -- COMMAND (see distlock --help)", args[0]))
	case cmd == nil:
		return report("distlock", usageErrorf("unknown command %q (see distlock --help)", args[0]))
	}
	return report("distlock "+cmd.name, cmd.run(args[1:]))
}

// help prints the usage of the command named in args, or of distlock
// itself.
func help(args []string) int {
	if len(args) == 0 {
		printTopUsage(os.Stdout)
		return exitOK
	}
	cmd := lookup(args[0])
	if cmd == nil {
		return report("distlock help", usageErrorf("unknown command %q (see distlock --help)", args[0]))
	}
	printUsage(os.Stdout, cmd, cmd.flags())
	return exitOK
}
