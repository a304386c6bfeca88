package redistest

// An Option configures a server started by [NewServer] or [Start].
type Option func(*config)

type config struct {
	args     []string
	password string

	// sentinelConf, when set, is the content of sentinel.conf: the server
	// runs in sentinel mode (see NewSentinel).
	sentinelConf string

	// replicas is how many replicas NewCluster gives each master
	// (WithReplicas); other starters ignore it.
	replicas int

	// pickPort returns a candidate port; nil means freePort.
	// Tests use it to simulate port collisions.
	pickPort func() (int, error)
}

// WithArgs appends extra command-line arguments for redis-server, for example
// WithArgs("--maxmemory", "1mb"). They come after the arguments this package
// sets, so for most settings they take precedence; do not override --port,
// --bind, --dir, --logfile or --daemonize, which the package relies on.
// Arguments are kept across [Server.Restart].
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithPassword starts the server with --requirepass pw. The password is used
// by [Server.Options], [Server.Client] and [Server.URL], and by the package's
// own readiness checks.
func WithPassword(pw string) Option {
	return func(c *config) { c.password = pw }
}

// WithReplicas makes [NewCluster] give each master r replicas (r >= 0).
// Other starters ignore it.
func WithReplicas(r int) Option {
	return func(c *config) { c.replicas = r }
}
