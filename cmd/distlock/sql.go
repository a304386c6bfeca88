package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schemes of SQL URLs, and the port of a MariaDB or MySQL address
// without one (pgx knows PostgreSQL's).
const (
	postgresScheme   = "postgres"
	postgresqlScheme = "postgresql"
	mysqlScheme      = "mysql"
	defaultMySQLPort = "3306"
)

// The names of the databases in messages. MariaDB and MySQL are told
// apart by nothing in a mysql:// URL.
const (
	dbmsPostgres = "PostgreSQL"
	dbmsMySQL    = "MariaDB/MySQL"
)

// The forms of the SQL URLs, for messages.
const (
	postgresURLForm = "want postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?table=NAME&notify=off&...], or postgresql://"
	mysqlURLForm    = "want mysql://USER[:PASSWORD]@HOST[:PORT]/DB[?table=NAME&tls=true&...]"
)

// isSQLScheme reports whether scheme (lower case) names a SQL store.
func isSQLScheme(scheme string) bool {
	return scheme == postgresScheme || scheme == postgresqlScheme || scheme == mysqlScheme
}

// postgresParams are the query parameters of a postgres:// URL, other
// than the command's own (table, notify), that are handed on to pgx:
// libpq's connection parameters that pgx reads, pgx's and pgxpool's own,
// and a few server settings that pgx sends when it connects. pgx would
// send any other parameter to the server as a setting, which refuses the
// connection for a name it does not know: a misspelt sslmode would fail
// as an unreachable database, so the command refuses it first.
var postgresParams = []string{
	// libpq's, as pgconn reads them.
	"host", "port", "database", "user", "password", "passfile", "connect_timeout",
	"sslmode", "sslkey", "sslcert", "sslcertmode", "sslrootcert", "sslnegotiation", "sslpassword", "sslsni",
	"krbspn", "krbsrvname", "target_session_attrs", "service", "servicefile",
	"min_protocol_version", "max_protocol_version", "channel_binding", "require_auth",
	// pgx's.
	"default_query_exec_mode", "statement_cache_capacity", "description_cache_capacity",
	// pgxpool's.
	"pool_max_conns", "pool_min_conns", "pool_min_idle_conns", "pool_max_conn_lifetime",
	"pool_max_conn_idle_time", "pool_health_check_period", "pool_max_conn_lifetime_jitter", "pool_ping_timeout",
	// Server settings.
	"application_name", "search_path", "options",
}

// mysqlParams are the query parameters of a mysql:// URL, other than the
// command's own (table), that set the driver's configuration.
var mysqlParams = []string{"tls", "timeout", "readTimeout", "writeTimeout", "allowCleartextPasswords"}

// A sqlTarget is what a SQL URL says, besides the driver's settings.
type sqlTarget struct {
	dbms  string // dbmsPostgres or dbmsMySQL
	addr  string // HOST:PORT of each server given, for messages
	table string // the table parameter, or sqlstore.DefaultTable
	opts  []sqlstore.Option
}

// newSQLSession returns a session on the PostgreSQL, MariaDB or MySQL
// database that the URL u names, without contacting it.
func newSQLSession(rf *storeFlags, u storeURL, opts []distlock.Option) (*session, error) {
	scheme, _, _ := strings.Cut(u.url, "://")
	var (
		s   *session
		err error
	)
	if strings.EqualFold(scheme, mysqlScheme) {
		s, err = newMySQLSession(u)
	} else {
		s, err = newPostgresSession(u)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case rf.prefixSet:
		s.closeSQL()
		return nil, usageErrorf("--prefix is for the keys of Redis and etcd; %s keeps the locks in a table: name it with the table parameter of the URL in %s (default %s)",
			s.dbms, u.from, sqlstore.DefaultTable)
	case rf.tls.set():
		s.closeSQL()
		if s.dbms == dbmsPostgres {
			return nil, usageErrorf("--tls-ca, --tls-cert and --tls-key are for rediss:// and etcds://; a postgres:// URL takes libpq's parameters instead: sslmode=verify-full&sslrootcert=FILE&sslcert=FILE&sslkey=FILE")
		}
		return nil, usageErrorf("--tls-ca, --tls-cert and --tls-key are for rediss:// and etcds://; a mysql:// URL takes tls=true (the system's CAs), tls=skip-verify or tls=preferred")
	}
	s.client = distlock.New(s.sqlStore, opts...)
	return s, nil
}

// newPostgresSession returns a session on the PostgreSQL database of the
// postgres:// or postgresql:// URL u, through a pgx pool that is not
// connected yet. The command's parameters (table, notify) are taken out
// of the URL, and pgx parses the rest: libpq's forms (several hosts,
// host=/DIR for a Unix socket) and environment variables ($PGPASSWORD,
// $PGSSLMODE, ...) work as with psql.
func newPostgresSession(u storeURL) (*session, error) {
	bad := func(format string, args ...any) error {
		return usageErrorf("invalid PostgreSQL URL in %s: %s (%s)", u.from, fmt.Sprintf(format, args...), postgresURLForm)
	}
	base, rawQuery, _ := strings.Cut(u.url, "?")
	if strings.Contains(u.url, "#") {
		return nil, bad("unexpected fragment")
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, bad("%v", err)
	}
	t := sqlTarget{dbms: dbmsPostgres}
	if err := t.takeParams(q, bad); err != nil {
		return nil, err
	}
	for k := range q {
		if !slices.Contains(postgresParams, k) {
			return nil, bad("unknown parameter %q (the command's are table and notify; pgx's are libpq's connection parameters, such as sslmode, connect_timeout, application_name)", k)
		}
	}
	_, rest, _ := strings.Cut(base, "://")
	authority, _, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = authority[at+1:]
	}
	if authority == "" && !q.Has("host") {
		return nil, bad("missing host (for a Unix socket, give host=/DIR)")
	}
	connString := base
	if len(q) > 0 {
		connString += "?" + q.Encode()
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, bad("%s", pgxParseError(err, u.url))
	}
	t.addr = postgresAddrs(cfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, bad("%s", pgxParseError(err, u.url))
	}
	return &session{addr: t.addr, dbms: t.dbms, table: t.table, pg: pool, sqlStore: sqlstore.NewPostgres(pool, t.opts...)}, nil
}

// takeParams takes the command's parameters out of q: table and, on
// PostgreSQL, notify. bad makes the usage error of a bad value.
func (t *sqlTarget) takeParams(q url.Values, bad func(string, ...any) error) error {
	t.table = sqlstore.DefaultTable
	for _, k := range []string{"table", "notify"} {
		if !q.Has(k) {
			continue
		}
		v := q[k]
		q.Del(k)
		if len(v) != 1 || v[0] == "" {
			return bad("give %s once, not empty", k)
		}
		switch k {
		case "table":
			if err := checkTable(v[0]); err != nil {
				return bad("%v", err)
			}
			t.table = v[0]
			t.opts = append(t.opts, sqlstore.WithTable(v[0]))
		case "notify":
			if t.dbms != dbmsPostgres {
				return bad("notify is for PostgreSQL: MariaDB and MySQL have no notifications, and their waiters always poll, every %v", sqlstore.DefaultPollInterval)
			}
			switch strings.ToLower(v[0]) {
			case "on", "true", "1":
			case "off", "false", "0":
				t.opts = append(t.opts, sqlstore.WithoutNotify())
			default:
				return bad("notify=%s: want on or off", v[0])
			}
		}
	}
	return nil
}

// checkTable checks the name of a store's table, as sqlstore.WithTable
// does.
func checkTable(name string) error {
	if _, err := sqlstore.PostgresSchema(sqlstore.WithTable(name)); err != nil {
		return fmt.Errorf("table %q: want lower-case letters, digits and underscores, up to 30, optionally SCHEMA.TABLE", name)
	}
	return nil
}

// pgxParseError is the message of pgx's refusal of a connection string,
// without the string (pgx masks its password, but the command never
// repeats a URL) and, in case pgx repeats part of it, without the
// password of the URL s.
func pgxParseError(err error, s string) string {
	var msg string
	if uerr := (*url.Error)(nil); errors.As(err, &uerr) {
		msg = uerr.Err.Error() // url.Error repeats the URL
	} else {
		msg = err.Error()
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			msg = msg[i+len("`: "):]
		}
	}
	if _, rest, ok := strings.Cut(s, "://"); ok {
		authority, _, _ := strings.Cut(rest, "/")
		if at := strings.LastIndex(authority, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(authority[:at], ":"); ok && pw != "" {
				msg = strings.ReplaceAll(msg, pw, "xxxxx")
				if dec, err := url.PathUnescape(pw); err == nil && dec != "" {
					msg = strings.ReplaceAll(msg, dec, "xxxxx")
				}
			}
		}
	}
	return msg
}

// postgresAddrs lists the servers that pgx tries, HOST:PORT (or the
// socket's path), without repeats: sslmode=prefer tries each twice.
func postgresAddrs(cfg pgconn.Config) string {
	var addrs []string
	add := func(host string, port uint16) {
		a := net.JoinHostPort(host, strconv.Itoa(int(port)))
		if strings.HasPrefix(host, "/") {
			a = fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
		}
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return strings.Join(addrs, ",")
}

// newMySQLSession returns a session on the MariaDB or MySQL database of
// the mysql:// URL u, through a database/sql pool that is not connected
// yet. The URL is turned into go-sql-driver's configuration field by
// field.
func newMySQLSession(u storeURL) (*session, error) {
	bad := func(format string, args ...any) error {
		return usageErrorf("invalid MySQL URL in %s: %s (%s)", u.from, fmt.Sprintf(format, args...), mysqlURLForm)
	}
	pu, err := url.Parse(u.url)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, bad("%v", err)
	}
	switch {
	case pu.Host == "":
		return nil, bad("missing host")
	case pu.User == nil || pu.User.Username() == "":
		return nil, bad("missing USER")
	case pu.Fragment != "":
		return nil, bad("unexpected fragment")
	}
	if err := checkAddr(pu.Host); err != nil {
		return nil, bad("%v", err)
	}
	db := strings.TrimPrefix(pu.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, bad("the path must be the database, /DB")
	}
	q, err := url.ParseQuery(pu.RawQuery)
	if err != nil {
		return nil, bad("%v", err)
	}
	t := sqlTarget{dbms: dbmsMySQL, addr: pu.Host}
	if pu.Port() == "" {
		t.addr = net.JoinHostPort(pu.Hostname(), defaultMySQLPort)
	}
	if err := t.takeParams(q, bad); err != nil {
		return nil, err
	}
	cfg := mysql.NewConfig()
	cfg.User = pu.User.Username()
	cfg.Passwd, _ = pu.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = t.addr
	cfg.DBName = db
	cfg.Logger = &mysql.NopLogger{} // failures are reported once, in the command's words
	for k, v := range q {
		if !slices.Contains(mysqlParams, k) {
			return nil, bad("unknown parameter %q (the known ones are table, %s)", k, strings.Join(mysqlParams, ", "))
		}
		if len(v) != 1 || v[0] == "" {
			return nil, bad("give %s once, not empty", k)
		}
		if err := setMySQLParam(cfg, k, v[0]); err != nil {
			return nil, bad("%s=%s: %v", k, v[0], err)
		}
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, bad("%v", err)
	}
	sdb := sql.OpenDB(connector)
	return &session{addr: t.addr, dbms: t.dbms, table: t.table, sqldb: sdb, sqlStore: sqlstore.NewMySQL(sdb, t.opts...)}, nil
}

// setMySQLParam sets the driver's setting of the URL parameter k to v.
func setMySQLParam(cfg *mysql.Config, k, v string) error {
	switch k {
	case "tls":
		if !slices.Contains([]string{"true", "false", "skip-verify", "preferred"}, v) {
			return errors.New("want true, false, skip-verify or preferred")
		}
		cfg.TLSConfig = v
	case "timeout", "readTimeout", "writeTimeout":
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return errors.New("want a duration such as 5s")
		}
		switch k {
		case "timeout":
			cfg.Timeout = d
		case "readTimeout":
			cfg.ReadTimeout = d
		default:
			cfg.WriteTimeout = d
		}
	case "allowCleartextPasswords":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("want true or false")
		}
		cfg.AllowCleartextPasswords = b
	}
	return nil
}

// pingSQL checks that the database answers a query, which also checks
// that it accepts the session's user and password.
func (s *session) pingSQL(ctx context.Context) error {
	var one int
	var err error
	if s.pg != nil {
		err = s.pg.QueryRow(ctx, "SELECT 1").Scan(&one)
	} else {
		err = s.sqldb.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}
	return s.sqlFailure(err)
}

// isSQL reports whether the session is on a SQL database.
func (s *session) isSQL() bool { return s.pg != nil || s.sqldb != nil }

// closeSQL closes the session's pool; the store never closes it.
func (s *session) closeSQL() {
	if s.pg != nil {
		s.pg.Close()
	}
	if s.sqldb != nil {
		_ = s.sqldb.Close()
	}
}

// sqlFailure turns an error of a SQL database into an exitError: wrong
// credentials or missing privileges (77); a request that the store
// cannot serve (64); an unavailable or failing database (69). Other
// errors, and exitErrors, are returned as they are.
func (s *session) sqlFailure(err error) error {
	if settled(err) {
		return err
	}
	switch {
	case errors.Is(err, distlock.ErrUnsupported):
		return s.unsupported("this request", err)
	case errors.Is(err, distlock.ErrInvalidOption), errors.Is(err, context.Canceled):
		return err
	}
	switch sqlAuthKind(err) {
	case sqlBadCredentials:
		return exitf(exitNoPerm, "%s at %s refused the credentials: %v", s.dbms, s.addr, rootCause(err))
	case sqlNoPrivilege:
		return exitf(exitNoPerm, "%s at %s refused a request to this user (it needs to read and write the tables %s and %s_once, and to create them unless they exist: see distlock sql-schema): %v",
			s.dbms, s.addr, s.table, s.table, rootCause(err))
	}
	var pgErr *pgconn.PgError
	var myErr *mysql.MySQLError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return exitf(exitUnavailable, "cannot reach %s at %s: no answer within %v", s.dbms, s.addr, pingTimeout)
	case errors.As(err, &pgErr), errors.As(err, &myErr):
		return exitf(exitUnavailable, "%s at %s: %v", s.dbms, s.addr, rootCause(err))
	}
	return exitf(exitUnavailable, "cannot reach %s at %s: %v", s.dbms, s.addr, rootCause(err))
}

// The kinds of refusals of a SQL database to a user.
const (
	sqlNotAuth        = iota
	sqlBadCredentials // the user or its password
	sqlNoPrivilege    // a request to this user
)

// sqlAuthKind says whether err is a SQL database refusing the user name
// or password, or a request to this user.
func sqlAuthKind(err error) int {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return sqlBadCredentials
		case "42501": // insufficient_privilege
			return sqlNoPrivilege
		}
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1045: // ER_ACCESS_DENIED_ERROR: user or password
			return sqlBadCredentials
		case 1044, 1142, 1143: // ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR
			return sqlNoPrivilege
		}
	}
	return sqlNotAuth
}
