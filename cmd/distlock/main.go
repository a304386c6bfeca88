// Command distlock runs commands under distributed locks kept in Redis,
// etcd, PostgreSQL, MariaDB or MySQL, and shows and manages those locks.
//
// Usage:
//
//	distlock run [flags] NAME -- COMMAND [ARGS...]
//	distlock status [--watch] [flags] NAME
//	distlock list [flags] [PATTERN]
//	distlock unlock --force [--now] [flags] NAME
//	distlock permits [flags] NAME N
//	distlock sql-schema postgres|mysql [--table NAME]
//	distlock dashboard
//	distlock demo [flags]
//	distlock help [COMMAND]
//	distlock --version
//
// The run command acquires the lock NAME, runs COMMAND while renewing the
// lock's lease, and releases the lock when COMMAND exits. COMMAND finds the
// lock's name and its fencing token in the environment variables
// DISTLOCK_NAME and DISTLOCK_TOKEN. If the lock is lost while COMMAND runs,
// COMMAND is stopped. Run with --wait 0 skips COMMAND (status 75) while
// the lock is held, so that two runs never overlap; with --once-per
// PERIOD, COMMAND runs at most once per period on all machines together,
// whichever runs first: that is what makes a cron job scheduled on many
// machines run once. Run with --fair serves the waiters of a lock, on
// every machine, in the order they arrived; with --shared and --exclusive
// it takes a side of a read-write lock; with --semaphore N, at most N
// commands run at once, on every machine together. The permits command
// sets a semaphore's number of permits.
//
// Every command reads the store's URL from --store (or --redis, for
// Redis only), else from $DISTLOCK_STORE, else from $REDIS_URL, else uses
// redis://127.0.0.1:6379; etcd://HOST:2379[,HOST:2379...] names an etcd
// cluster, postgres://USER@HOST/DB a PostgreSQL database and
// mysql://USER@HOST/DB a MariaDB or MySQL one. The sql-schema command
// prints the SQL that creates the tables of a SQL store. Run with
// --metrics-addr serves the lock's metrics for Prometheus, and the
// dashboard command prints a Grafana dashboard of them. See "distlock help COMMAND" for the flags of each command, and
// docs/cli.md for the exit statuses and recipes.
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

func main() {
	os.Exit(runMain(os.Args[1:]))
}

// runMain runs the distlock command with the given arguments (without the
// program name) and returns its exit status.
func runMain(args []string) int {
	if len(args) == 0 {
		return report("distlock", usageErrorf("missing command: run, status, list, unlock, permits, sql-schema, dashboard or demo (see distlock --help)"))
	}
	global, args, err := leadingGlobalFlags(args)
	if err != nil {
		return report("distlock", err)
	}
	if len(args) == 0 {
		return report("distlock", usageErrorf("missing command after %s: run, status, list, unlock, permits, sql-schema, dashboard or demo (see distlock --help)", strings.Join(global, " ")))
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
		return report("distlock", usageErrorf("unknown flag --%s before the command: only --store, --redis, --redlock, --prefix and the --tls- flags may come before it; the command's own flags go after it, as in distlock run --wait 0 NAME -- COMMAND (see distlock --help)", strings.TrimLeft(args[0], "-")))
	case cmd == nil:
		return report("distlock", usageErrorf("unknown command %q (see distlock --help)", args[0]))
	}
	// The global flags go first, so that the command's own --redis or
	// --prefix, if given too, wins.
	return report("distlock "+cmd.name, cmd.run(append(global, args[1:]...)))
}

// globalFlags are the flags every command has, which may also come before
// the command's name (distlock --redis URL status NAME), as in git or
// kubectl.
var globalFlags = []string{"store", "redis", "redlock", "prefix", "tls-ca", "tls-cert", "tls-key"}

// leadingGlobalFlags splits the global flags at the start of args (in the
// forms --redis URL, --redis=URL, and with a single dash) from the rest,
// which starts with the command.
func leadingGlobalFlags(args []string) (global, rest []string, err error) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" && args[0] != "--" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if !slices.Contains(globalFlags, name) {
			break
		}
		if hasValue {
			global, args = append(global, args[0]), args[1:]
			continue
		}
		if len(args) < 2 {
			return nil, nil, usageErrorf("flag --%s needs a value, and a command after it (see distlock --help)", name)
		}
		global, args = append(global, args[0], args[1]), args[2:]
	}
	return global, args, nil
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
