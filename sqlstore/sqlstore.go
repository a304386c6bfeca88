package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
)

// DefaultTable is the name of the store's table, and the prefix of its
// other one (DefaultTable + "_once").
const DefaultTable = "distlock_locks"

// MinLease is the shortest lease, and queue timeout, a store accepts: a
// transaction that commits to disk, behind others on the same row, takes
// milliseconds to tens of milliseconds, and the Client renews a lease at a
// third of its length.
const MinLease = time.Second

// DefaultPollInterval is how often, at the least, a store that does not
// hear notifications (MySQL, MariaDB, WithoutNotify) looks for changes of
// the locks its Client waits for: more often (every 2 ms at first, then
// an eighth of the time waited so far) while a wait is young, since most
// critical sections are short.
const DefaultPollInterval = 50 * time.Millisecond

// retention is how long a semaphore's capacity outlives its last use.
const retention = 24 * time.Hour

// An Option configures a store.
type Option func(*config)

type config struct {
	table     string
	migrate   bool
	notify    bool
	poll      time.Duration
	err       error
	txTimeout time.Duration
}

var tablePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,29}(\.[a-z_][a-z0-9_]{0,29})?$`)

// WithTable sets the name of the store's table (default distlock_locks;
// its records of jobs run once are in the table of that name with "_once"
// added): lower-case letters, digits and underscores, optionally
// qualified by a schema ("locks.distlock"). Clients that share locks must
// use the same table.
func WithTable(name string) Option {
	return func(c *config) {
		if !tablePattern.MatchString(name) {
			c.err = fmt.Errorf("%w: SQL table name %q: want lower-case letters, digits and underscores, up to 30, optionally schema.table", store.ErrInvalidOption, name)
		}
		c.table = name
	}
}

// WithoutMigration makes the store use its tables as they are, for teams
// that create them with their own migrations (PostgresSchema,
// MySQLSchema) or with Store.Migrate: by default the store creates them on
// first use if they are missing.
func WithoutMigration() Option {
	return func(c *config) { c.migrate = false }
}

// WithoutNotify makes a PostgreSQL store poll for changes, as a MySQL one
// does, instead of listening for notifications: for a database reached
// through a pooler in transaction mode (PgBouncer's pool_mode =
// transaction), where LISTEN does not work. Waiters then learn of a
// release within the poll interval rather than at once. Behind such a
// pooler, pgx must not cache prepared statements either: give the pool
// default_query_exec_mode=exec (or simple_protocol) in its connection
// string.
func WithoutNotify() Option {
	return func(c *config) { c.notify = false }
}

// WithPollInterval sets how often, at the least, a store that polls
// (MySQL, MariaDB, WithoutNotify) reads the rows of the locks its Client
// waits for (one query for all of them, jittered by a tenth either way;
// more often while a wait is young, see DefaultPollInterval). Default
// DefaultPollInterval; at least a millisecond.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond {
			c.err = fmt.Errorf("%w: SQL poll interval %v: at least 1ms", store.ErrInvalidOption, d)
		}
		c.poll = d
	}
}

func newConfig(opts []Option) config {
	cfg := config{table: DefaultTable, migrate: true, notify: true, poll: DefaultPollInterval}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}

// Store implements store.Store on a SQL database. NewPostgres and NewMySQL
// return it.
type Store struct {
	db   dialect
	cfg  config
	err  error
	id   string // random: tells this store's own releases apart
	host string
	pid  int

	migrated sync.Mutex // held while the tables are checked
	ready    bool       // under migrated

	hub *hub
}

func newStore(db dialect, cfg config) *Store {
	var id [8]byte
	_, _ = rand.Read(id[:])
	host, _ := os.Hostname()
	s := &Store{db: db, cfg: cfg, err: cfg.err, id: hex.EncodeToString(id[:]), host: host, pid: os.Getpid()}
	s.hub = newHub(s)
	return s
}

// Err implements store.Validator.
func (s *Store) Err() error { return s.err }

// Validate implements store.Validator: the store serves every kind, with
// leases and queue timeouts of MinLease or more.
func (s *Store) Validate(kind store.Kind, lease, queue time.Duration) error {
	switch {
	case s.err != nil:
		return s.err
	case lease < MinLease:
		return fmt.Errorf("%w: a lease of %v on SQL: the shortest is %v", store.ErrInvalidOption, lease, MinLease)
	case kind.Queued() && queue > 0 && queue < MinLease:
		return fmt.Errorf("%w: a queue timeout of %v on SQL: the shortest is %v", store.ErrInvalidOption, queue, MinLease)
	}
	return nil
}

// System names the store for observers (store.SystemNamer):
// "postgresql" or "mysql" (MariaDB too).
func (s *Store) System() string {
	if _, ok := s.db.(*postgres); ok {
		return "postgresql"
	}
	return "mysql"
}

// Close ends the store's listening connection or poller. It does not
// close the pool or database given to the constructor.
func (s *Store) Close() error {
	s.hub.close()
	return nil
}

// Migrate creates the store's tables now if they are missing (under an
// advisory lock, so that processes starting together do not race), even
// on a store made WithoutMigration: for a deployment step that runs with
// the privileges to create tables, before the application, which then
// needs only to read and write them. A store that migrates (the default)
// does the same at its first use.
func (s *Store) Migrate(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	s.migrated.Lock()
	defer s.migrated.Unlock()
	if err := s.db.migrate(ctx); err != nil {
		return backendErr(fmt.Errorf("creating distlock's tables: %w", err))
	}
	s.ready = true
	return nil
}

// prepare checks the store's settings, and makes its tables once.
func (s *Store) prepare(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	s.migrated.Lock()
	defer s.migrated.Unlock()
	if s.ready {
		return nil
	}
	if s.cfg.migrate {
		if err := s.db.migrate(ctx); err != nil {
			if s.db.readOnly(err) {
				return unsent(fmt.Errorf("checking or creating distlock's tables: %w%s", err, readOnlyHint))
			}
			return unsent(fmt.Errorf("checking or creating distlock's tables (or make the store WithoutMigration and apply the schema yourself): %w", err))
		}
	}
	s.ready = true
	return nil
}

// A row is one lock's row, as a transaction read it.
type row struct {
	name  string
	token uint64
	rev   uint64
	state lockState
	raw   string // the state column as read
	read  uint64 // token as read
	enc   *written
}

// written is a row's columns as a step left them.
type written struct {
	kind    string
	owner   *string    // OwnerID of the first holder
	expires *time.Time // the last holder's lease end, UTC
	state   string
}

// encode returns the row's columns as its state now says.
func (r *row) encode() written {
	if r.enc != nil {
		return *r.enc
	}
	b, _ := json.Marshal(&r.state)
	w := written{kind: r.state.Kind, state: string(b)}
	if len(r.state.Holders) > 0 {
		id := store.OwnerID(r.state.Holders[0].Owner)
		w.owner = &id
		t := time.UnixMicro(r.state.until()).UTC()
		w.expires = &t
	}
	r.enc = &w
	return w
}

// reset undoes what steps did to the row.
func (r *row) reset() error {
	r.state, r.token, r.enc = lockState{}, r.read, nil
	return decodeState(r, r.raw)
}

// dirty reports whether a step changed the row.
func (r *row) dirty() bool {
	return r.token != r.read || r.encode().state != r.raw
}

// A dialect is one database's SQL.
type dialect interface {
	// migrate creates the tables if they are missing.
	migrate(ctx context.Context) error
	// begin starts a transaction.
	begin(ctx context.Context) (transaction, error)
	// create makes the rows of names that do not exist, each in a
	// statement of its own, outside any transaction.
	create(ctx context.Context, names []string) error
	// read returns the committed rows of names that exist, and the
	// database's clock, without locking anything.
	read(ctx context.Context, names []string) ([]*row, int64, error)
	// held returns the names of the locks held now.
	held(ctx context.Context) ([]string, error)
	// retryable reports whether err aborted a transaction that can be
	// tried again (a deadlock, a serialization failure).
	retryable(err error) bool
	// missingTable reports whether err says that a table does not exist.
	missingTable(err error) bool
	// readOnly reports whether err says that the server takes no writes
	// (a standby, a read-only replica).
	readOnly(err error) bool
	onceTable
}

// A transaction is a step's hold on its rows: on PostgreSQL a database
// transaction that locks them until it commits or rolls back; on MySQL a
// read of them that commit writes back by compare-and-swap.
type transaction interface {
	// lock reads the rows of names (sorted) that exist, and the
	// database's clock (read as they are: possibly before their locks
	// are granted, which is safe, see pgTx.lock); on PostgreSQL it locks
	// them FOR UPDATE.
	lock(ctx context.Context, names []string) ([]*row, int64, error)
	// commit writes rows, sends notices (where the database can), and
	// commits; relaxed, it may return before the commit is durable (a
	// crash may then lose it). Its outcome is unknown when it fails, but
	// for errConflict: nothing was written.
	commit(ctx context.Context, rows []*row, notices []notice, relaxed bool) error
	// rollback ends the transaction without writing.
	rollback()
	// saveOnce writes the record of the job name, kept for keep from
	// the database's clock, in the transaction.
	saveOnce(ctx context.Context, name string, rec store.Record, keep time.Duration) error
}

// errConflict is a commit's outcome when another step wrote a row since
// this one read it: nothing was written, and transact starts the step
// again.
var errConflict = fmt.Errorf("%w: the row changed", store.ErrUnsent)

// A oneRowSteps dialect writes one row per step (see mysql.begin): the
// store makes MultiMutex's members and renewals steps of their own.
type oneRowSteps interface{ singleRow() bool }

// errDiscard makes transact roll back: the step's outcome is returned,
// but nothing of it is written.
var errDiscard = errors.New("discard")

// transact runs fn on the rows of names, held in one transaction (locked
// in name order, so that transactions never wait for each other in a
// cycle; or read and written back by compare-and-swap, started again on a
// conflict), with the database's clock, and commits what it changed; the
// notices of its steps are sent at commit, and delivered to this store's
// own watchers. With create, missing rows are made first; without, fn
// gets only the rows that exist. fn returning errDiscard rolls back
// (transact then returns nil); any other error is returned.
//
// Until the commit is sent, nothing of the transaction can be applied,
// now or later (a transaction whose connection breaks is rolled back by
// the server): such a failure is wrapped with store.ErrUnsent. A commit
// that fails has an unknown outcome.
func (s *Store) transact(ctx context.Context, names []string, create bool, fn func(w *work) error) (err error) {
	if err := s.prepare(ctx); err != nil {
		return err
	}
	defer func() { err = s.hint(err) }()
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	for attempt := 0; ; attempt++ {
		tx, err := s.db.begin(ctx)
		if err != nil {
			return unsent(err)
		}
		rows, now, err := tx.lock(ctx, names)
		if err != nil {
			tx.rollback()
			if s.db.retryable(err) && attempt < 10 && ctx.Err() == nil {
				continue
			}
			return unsent(err)
		}
		if create && len(rows) < len(names) {
			tx.rollback()
			if attempt >= 10 {
				return unsent(errors.New("rows of locks could not be created"))
			}
			if err := s.db.create(ctx, missing(names, rows)); err != nil {
				return unsent(err)
			}
			continue
		}
		byName := make(map[string]*row, len(rows))
		steps := make(map[string]*step, len(rows))
		for _, r := range rows {
			byName[r.name] = r
			steps[r.name] = &step{name: r.name, now: now, token: &r.token, retention: retention}
		}
		if err := fn(&work{now: now, rows: byName, steps: steps, tx: tx}); err != nil {
			tx.rollback()
			if errors.Is(err, errConflict) && attempt < 100 && ctx.Err() == nil {
				continue // nothing was written: the step starts again
			}
			if errors.Is(err, errDiscard) {
				return nil
			}
			return err
		}
		var notices []notice
		relaxed := true
		for _, r := range rows {
			st := steps[r.name]
			notices = append(notices, st.notices...)
			relaxed = relaxed && st.relaxed
		}
		for _, n := range notices {
			relaxed = relaxed && n.Type == noticeRelease
		}
		if err := tx.commit(ctx, rows, notices, relaxed); err != nil {
			if errors.Is(err, errConflict) && attempt < 100 && ctx.Err() == nil {
				continue // nothing was written: the step starts again
			}
			return backendErr(err)
		}
		s.hub.local(notices)
		return nil
	}
}

// work is what a transaction's function works on: the database's clock,
// the rows it locked, a step for each, and the transaction itself.
type work struct {
	now   int64
	rows  map[string]*row
	steps map[string]*step
	tx    transaction
}

// hint adds to an error that says the store's table does not exist
// what to do about it.
func (s *Store) hint(err error) error {
	switch {
	case err == nil:
		return nil
	case s.db.readOnly(err):
		return fmt.Errorf("%w%s", err, readOnlyHint)
	case s.db.missingTable(err):
		return fmt.Errorf("%w (the store was made WithoutMigration: apply sqlstore.PostgresSchema or MySQLSchema with table %q, or `distlock sql-schema`)", err, s.cfg.table)
	}
	return err
}

// readOnlyHint follows the error of a step that a read-only server
// refused.
const readOnlyHint = " (the server takes no writes: a standby or a read-only replica? Point the store at the primary; with PostgreSQL's multi-host DSNs, target_session_attrs=read-write)"

// missing returns the names that have no row in rows.
func missing(names []string, rows []*row) []string {
	var out []string
	for _, n := range names {
		if !slices.ContainsFunc(rows, func(r *row) bool { return r.name == n }) {
			out = append(out, n)
		}
	}
	return out
}

// one runs fn on the row of name (nil if it does not exist and create is
// false), then each of then, as transact does.
func (s *Store) one(ctx context.Context, name string, create bool, fn func(r *row, st *step) error, then ...func(w *work) error) error {
	return s.transact(ctx, []string{name}, create, func(w *work) error {
		r, st := w.rows[name], w.steps[name]
		if err := fn(r, st); err != nil {
			return err
		}
		for _, f := range then {
			if err := f(w); err != nil {
				return err
			}
		}
		return nil
	})
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, r store.Request) (store.Grant, error) {
	if f := s.fast(r); f != nil {
		if g, ok, err := s.takeFast(ctx, f, r); ok || err != nil {
			return g, err
		}
	}
	if g, ok := s.refusedAsRead(ctx, r); ok {
		return g, nil
	}
	var g store.Grant
	err := s.one(ctx, r.Name, true, func(row *row, st *step) error {
		var err error
		g, err = row.state.acquire(st, r, s.host, s.pid)
		return err
	})
	return g, err
}

// refusedAsRead reports the outcome of a plain mutex's acquisition read
// from the committed row, without locking it, when that outcome writes
// nothing: a refusal by a live holder whose release is already to be told
// (lockState.Waited). Such a refusal is what the locked step would have
// answered at the read, and changes nothing; it costs a read, not a
// transaction, while many waiters of a contended lock try again. Any other
// outcome (or a failed read) goes the locked way. Where the steps
// themselves read first (MySQL), it is not needed.
func (s *Store) refusedAsRead(ctx context.Context, r store.Request) (store.Grant, bool) {
	if _, ok := s.db.(oneRowSteps); ok || r.Kind != store.Plain || r.Reenter || s.prepare(ctx) != nil {
		return store.Grant{}, false
	}
	rows, now, err := s.db.read(ctx, []string{r.Name})
	if err != nil || len(rows) == 0 {
		return store.Grant{}, false
	}
	row := rows[0]
	st := &step{name: r.Name, now: now, token: &row.token, retention: retention}
	g, err := row.state.acquire(st, r, s.host, s.pid)
	if err != nil || g.Acquired || row.dirty() {
		return store.Grant{}, false
	}
	return g, true
}

// AcquireAll implements store.Store: all the members in one transaction,
// taken all or none.
func (s *Store) AcquireAll(ctx context.Context, rs []store.Request) ([]store.Grant, error) {
	if _, ok := s.db.(oneRowSteps); ok {
		return store.AcquireEach(ctx, s, rs)
	}
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	var gs []store.Grant
	var kindErr error
	err := s.transact(ctx, names, true, func(w *work) error {
		gs = gs[:0]
		for i, r := range rs {
			g, err := w.rows[r.Name].state.acquire(w.steps[r.Name], r, s.host, s.pid)
			if err == nil && g.Acquired {
				gs = append(gs, g)
				continue
			}
			// None is taken: the members before are as they were, and
			// this one keeps what its refusal wrote (a waiter's mark).
			for j, taken := range rs[:i] {
				gs[j] = store.Grant{}
				if taken.Name != r.Name {
					if err := w.rows[taken.Name].reset(); err != nil {
						return err
					}
					w.steps[taken.Name].notices = nil
				}
			}
			if err != nil {
				kindErr = err
				return errDiscard
			}
			gs = append(gs, g)
			return nil
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gs, kindErr
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, r store.Request) (store.Release, error) {
	if f := s.fast(r); f != nil {
		if ok, err := s.releaseFast(ctx, f, r); ok || err != nil {
			return store.Freed, err
		}
	}
	out := store.NotOwner
	err := s.one(ctx, r.Name, false, func(row *row, st *step) error {
		if row == nil {
			return errDiscard
		}
		out = row.state.release(st, r, s.id)
		st.relaxed = true
		return nil
	})
	return out, err
}

// Abandon implements store.Store.
func (s *Store) Abandon(ctx context.Context, r store.Request) (bool, error) {
	var freed bool
	err := s.one(ctx, r.Name, true, func(row *row, st *step) error {
		freed = row.state.abandon(st, r, s.id)
		return nil
	})
	return freed, err
}

// renewBatch is how many locks one renewal transaction holds at most.
const renewBatch = 100

// Renew implements store.Store: the requests in transactions of up to
// renewBatch locks each.
func (s *Store) Renew(ctx context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	batch := renewBatch
	if _, ok := s.db.(oneRowSteps); ok {
		batch = 1
	}
	for start := 0; start < len(rs); start += batch {
		part := rs[start:min(start+batch, len(rs))]
		names := make([]string, len(part))
		for i, r := range part {
			names[i] = r.Name
		}
		gs := make([]store.Grant, len(part))
		errs := make([]error, len(part))
		err := s.transact(ctx, names, false, func(w *work) error {
			for i, r := range part {
				row := w.rows[r.Name]
				switch {
				case row == nil && r.Queue > 0:
					gs[i], errs[i] = store.Grant{}, errPlaceGone
				case row == nil:
					gs[i], errs[i] = store.Grant{}, store.ErrNotHeld
				case r.Queue > 0:
					gs[i], errs[i] = row.state.refresh(w.steps[r.Name], r)
				default:
					gs[i], errs[i] = store.Grant{}, row.state.renew(w.steps[r.Name], r)
				}
			}
			return nil
		})
		for i := range part {
			if err != nil {
				report(start+i, store.Grant{}, err)
			} else {
				report(start+i, gs[i], errs[i])
			}
		}
	}
}

// unsent wraps err, the failure of a request that was certainly not
// applied and never will be, as store.ErrBackend and store.ErrUnsent.
func unsent(err error) error {
	if errors.Is(err, store.ErrUnsent) || errors.Is(err, store.ErrInvalidOption) {
		return err
	}
	if errors.Is(err, store.ErrBackend) {
		return fmt.Errorf("%w: %w", store.ErrUnsent, err)
	}
	return fmt.Errorf("%w: %w: %w", store.ErrBackend, store.ErrUnsent, err)
}

// backendErr wraps an error of the database as store.ErrBackend.
func backendErr(err error) error {
	if err == nil || errors.Is(err, store.ErrBackend) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrBackend, err)
}

// errPlaceGone is a refresh's outcome when the place is gone.
var errPlaceGone = fmt.Errorf("%w: the place in the queue is gone", store.ErrNotHeld)

// errOnlyReads refuses a write re-entry by an owner that only reads.
var errOnlyReads = fmt.Errorf("%w: the owner only reads now", store.ErrDeadlock)

// schema fills the table name into a schema file.
func schema(file string, cfg config) (string, error) {
	if cfg.err != nil {
		return "", cfg.err
	}
	return strings.ReplaceAll(file, "{{table}}", cfg.table), nil
}
