package sqltest

// An Option configures a server started by [NewPostgres], [StartPostgres],
// [NewMariaDB] or [StartMariaDB].
type Option func(*config)

type config struct {
	args []string

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
