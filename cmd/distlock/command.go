package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// A command is one subcommand of distlock.
type command struct {
	name     string
	synopsis string // what follows "distlock NAME" in the usage line
	summary  string // one line, for the list of commands
	doc      string // what the command does, for --help
	examples string // for --help
	hidden   bool   // left out of the list of commands

	// takesCommand makes everything after the first "--" a command line
	// to run, passed to the runner as line.command.
	takesCommand bool

	// setup defines the command's flags on fs and returns the function
	// that runs the command once fs has parsed the arguments.
	setup func(fs *flag.FlagSet) func(line commandLine) error
}

// A commandLine is the part of the arguments that is not flags.
type commandLine struct {
	args     []string // positional arguments
	command  []string // for takesCommand: the arguments after "--"
	dashdash bool     // for takesCommand: "--" was present
}

// commands lists the subcommands, in the order of the help text.
var commands = []*command{runCommand, statusCommand, listCommand, unlockCommand, permitsCommand, sqlSchemaCommand, dashboardCommand, demoCommand, demoWorkerCommand}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// flags returns a new flag set with the command's flags.
func (c *command) flags() *flag.FlagSet {
	fs := newFlagSet(c.name)
	c.setup(fs)
	return fs
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by report, in one line
	return fs
}

// run parses args and runs the command. Flags may come before, between
// and after the positional arguments.
func (c *command) run(args []string) error {
	fs := newFlagSet(c.name)
	runner := c.setup(fs)
	var line commandLine
	if c.takesCommand {
		if i := slices.Index(args, "--"); i >= 0 {
			args, line.command, line.dashdash = args[:i], args[i+1:], true
		}
	}
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(os.Stdout, c, fs)
		return nil
	}
	if err != nil {
		return usageErrorf("%s (see distlock %s --help)", flagMessage(err), c.name)
	}
	line.args = pos
	if c.takesCommand && len(pos) == 0 {
		// distlock run [flags] -- NAME -- COMMAND: a NAME that starts
		// with "-" comes after the first "--", as with status.
		if i := slices.Index(line.command, "--"); i >= 0 {
			line.args, line.command = line.command[:i], line.command[i+1:]
		}
	}
	return runner(line)
}

// parseInterspersed parses the flags in args with fs and returns the other
// arguments. Unlike fs.Parse, it does not stop at the first non-flag
// argument; it stops at "--", after which every argument is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// printUsage prints the help of c, with the flags defined in fs: the
// usage line and the summary, then the flags and the examples, then the
// description.
func printUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n", strings.TrimSpace("distlock "+c.name+" "+c.synopsis))
	fmt.Fprintf(w, "%s%s.\n", strings.ToUpper(c.summary[:1]), c.summary[1:])
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		if kind != "" {
			kind = " " + strings.ToUpper(kind)
		}
		fmt.Fprintf(w, "  --%s%s\n", f.Name, kind)
		if !isZeroDefault(f) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		for line := range strings.Lines(usage) {
			fmt.Fprintf(w, "        %s", line)
		}
		fmt.Fprintln(w)
	})
	if c.examples != "" {
		fmt.Fprintln(w, "\nExamples:")
		fmt.Fprint(w, strings.TrimLeft(c.examples, "\n"))
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, strings.TrimLeft(c.doc, "\n"))
}

// isZeroDefault reports whether the default of f goes without saying.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s", "forever":
		return true
	}
	return false
}

// printTopUsage prints the help of distlock itself.
func printTopUsage(w io.Writer) {
	fmt.Fprint(w, `distlock runs commands under distributed locks kept in Redis, etcd,
PostgreSQL, MariaDB or MySQL, and shows and manages those locks.

Usage: distlock [--store URL] [--prefix PREFIX] COMMAND [flags] [ARGS...]

Commands:
`)
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintf(w, `
Run "distlock COMMAND --help" for the flags and examples of a command, and
"distlock --version" for the version.

The store is --store URL (or --redis URL, for Redis only), else
$DISTLOCK_STORE, else $REDIS_URL, else %s:
  redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or rediss:// for TLS;
  etcd://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/?prefix=PREFIX],
  or etcds:// for TLS;
  postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?table=NAME&notify=off&...]
  (or postgresql://; pgx's parameters, such as sslmode, work too);
  mysql://USER[:PASSWORD]@HOST[:PORT]/DB[?table=NAME&tls=true], for
  MariaDB and MySQL. A SQL store keeps the locks in a table, which it
  creates on first use; "distlock sql-schema" prints its schema.
--tls-ca, --tls-cert and --tls-key set the CA and the client certificate
of rediss:// and etcds://. For Redlock over independent masters, give
--redlock URL once per master (3, 5, ...) instead of --store: a lock is
held on a majority of them. --store, --redis, --redlock, --prefix and the
--tls- flags may come before the command or among its flags.

Exit statuses:
%s
Examples:
  distlock run --once-per 24h nightly-report -- /usr/local/bin/report
  distlock run --semaphore 4 partner-api -- ./sync-orders.sh
  distlock status nightly-report
  distlock list 'nightly-*'
  distlock --store postgres://locker@db.internal/app run nightly -- ./report
  distlock sql-schema postgres | psql "$DATABASE_URL"
  distlock run --metrics-addr :9464 nightly -- ./report
  distlock demo
`, defaultRedisURL, exitStatusTable)
}

// flagWording rewrites the flag package's messages in the form the docs
// use: --flag, not -flag, and plain words.
var flagWording = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`^flag provided but not defined: -+(.+)$`), "unknown flag --$1"},
	{regexp.MustCompile(`^flag needs an argument: -+(.+)$`), "flag --$1 needs a value"},
	{regexp.MustCompile(`^invalid (boolean )?value (".*") for (flag )?-+([^:]+): (.*)$`), "invalid value $2 for --$4: $5"},
}

// flagMessage is the message of a flag parsing error, in the docs' words.
func flagMessage(err error) string {
	msg := err.Error()
	for _, w := range flagWording {
		if w.re.MatchString(msg) {
			return w.re.ReplaceAllString(msg, w.with)
		}
	}
	return msg
}
