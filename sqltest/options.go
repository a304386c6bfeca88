package sqltest

import "fmt"

// An Option configures a server started by [NewPostgres], [StartPostgres],
// [Postgres.NewReplica], [Postgres.StartReplica], [NewMariaDB],
// [StartMariaDB], [NewPgBouncer] or [StartPgBouncer].
type Option func(*config)

type config struct {
	args []string

	// synchronous makes a replica synchronous; only replicas take it.
	synchronous bool

	// pickPort returns a candidate port; nil means freePort.
	// Tests use it to simulate port collisions.
	pickPort func() (int, error)
}

// newConfig is the configuration that opts make.
func newConfig(opts []Option) config {
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	return c
}

// WithArgs appends extra command-line arguments for the server, after the
// ones this package sets, so that for most settings they take precedence:
// for PostgreSQL settings as "-c", "name=value" (for example
// WithArgs("-c", "max_connections=20")), for MariaDB as "--name=value"
// (WithArgs("--max-connections=20")). Do not override the port, the
// listen address, the data directory or the socket, which the package
// relies on. Arguments are kept across restarts.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithSynchronousReplication makes a replica started by
// [Postgres.NewReplica] or [Postgres.StartReplica] synchronous: its
// application name is added to the primary's synchronous_standby_names
// (with ALTER SYSTEM and a reload), so that from the return of NewReplica
// on, every transaction that the primary commits with synchronous_commit
// on (the default of the servers of this package; remote_write and
// remote_apply too) returns to its client only once the replica has
// written it to its write-ahead log, which a promotion replays. A
// transaction committed with synchronous_commit off or local does not
// wait, and may be missing on the replica.
//
// With several synchronous replicas of a primary, a commit waits for every
// one of them (synchronous_standby_names = 'ANY n (...)' with n of them).
// While one is down (killed, paused, shut down) the primary's commits wait
// for it to come back, as in production; Stop takes it out of the list.
//
// Only replicas take this option: the other servers refuse it.
func WithSynchronousReplication() Option {
	return func(c *config) { c.synchronous = true }
}

// notReplica refuses the options that only replicas take, for a server of
// kind.
func (c config) notReplica(kind string) error {
	if c.synchronous {
		return fmt.Errorf("sqltest: %s: WithSynchronousReplication is for replicas (Postgres.NewReplica)", kind)
	}
	return nil
}
