package sqlstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/distlock/distlock/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed schema/postgres.sql
var postgresSchema string

// NewPostgres returns a store on a PostgreSQL database (12 or later),
// through pool. It does not contact the database until it is used, and
// never closes pool. A nil pool or an invalid option makes every
// operation of a Client on the store fail with store.ErrInvalidOption.
//
// Each step is one transaction of two round trips on a connection of the
// pool; waiters hear of releases and grants through LISTEN on one more
// connection, which the store opens itself with the pool's settings
// (WithoutNotify: it polls instead).
func NewPostgres(pool *pgxpool.Pool, opts ...Option) *Store {
	cfg := newConfig(opts)
	if pool == nil && cfg.err == nil {
		cfg.err = fmt.Errorf("%w: nil PostgreSQL pool", store.ErrInvalidOption)
	}
	return newStore(&postgres{pool: pool, table: cfg.table}, cfg)
}

// PostgresSchema returns the SQL that creates the store's tables on
// PostgreSQL, with the table name that opts give (WithTable).
func PostgresSchema(opts ...Option) (string, error) {
	return schema(postgresSchema, newConfig(opts))
}

type postgres struct {
	pool  *pgxpool.Pool
	table string
}

// clockSQL reads the database's clock in µs: clock_timestamp(), the time
// of the statement's execution, not of the transaction's start.
const pgClock = `(extract(epoch from clock_timestamp()) * 1000000)::bigint`

func (p *postgres) migrate(ctx context.Context) error {
	var exists bool
	err := p.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL`,
		p.table, p.table+"_once").Scan(&exists)
	if err != nil || exists {
		return err
	}
	sql, _ := schema(postgresSchema, config{table: p.table})
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "distlock schema "+p.table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql)
		return err
	})
}

func (p *postgres) begin(ctx context.Context) (transaction, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &pgTx{p: p, c: c}, nil
}

type pgTx struct {
	p *postgres
	c *pgxpool.Conn
}

func (t *pgTx) lock(ctx context.Context, names []string) ([]*row, int64, error) {
	// The clock is read with the rows (it is evaluated as they are read,
	// possibly before their locks are granted): an earlier now is safe,
	// as it judges a lease still running, and sets one that ends sooner,
	// never later, than a later now would. Without rows, no step needs
	// it.
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	b.Queue(stepIdleTimeout)
	b.Queue(`SELECT name, token, rev, state, `+pgClock+` FROM `+t.p.table+` WHERE name = ANY($1) ORDER BY name FOR UPDATE`, names)
	br := t.c.SendBatch(ctx, b)
	rows, now, err := readLocked(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return rows, now, err
}

// stepIdleTimeout makes the server end the session of a step whose
// client goes silent while its transaction holds rows (a partition, a
// frozen process), long before TCP keepalive would notice (hours): the
// rows are free again for the other steps, their holders' renewals among
// them. A healthy client is idle in a step's transaction for a round
// trip; half of MinLease leaves the renewals of the shortest lease time
// to be confirmed behind such a step.
const stepIdleTimeout = `SET LOCAL idle_in_transaction_session_timeout = 500`

func readLocked(br pgx.BatchResults) ([]*row, int64, error) {
	for range 2 { // BEGIN, SET LOCAL
		if _, err := br.Exec(); err != nil {
			return nil, 0, err
		}
	}
	q, err := br.Query()
	if err != nil {
		return nil, 0, err
	}
	return scanRows(q, true)
}

// scanRows reads rows of name, token, rev, state, and with clock the
// database's clock too.
func scanRows(q pgx.Rows, clock bool) ([]*row, int64, error) {
	defer q.Close()
	var out []*row
	var now int64
	for q.Next() {
		var r row
		var token, rev int64
		var state string
		dest := []any{&r.name, &token, &rev, &state}
		if clock {
			dest = append(dest, &now)
		}
		if err := q.Scan(dest...); err != nil {
			return nil, 0, err
		}
		if err := decodeState(&r, state); err != nil {
			return nil, 0, err
		}
		r.token, r.rev, r.read = uint64(token), uint64(rev), uint64(token)
		out = append(out, &r)
	}
	return out, now, q.Err()
}

func (t *pgTx) commit(ctx context.Context, rows []*row, notices []notice, relaxed bool) error {
	defer t.c.Release()
	b := &pgx.Batch{}
	for _, r := range rows {
		if !r.dirty() {
			continue
		}
		w := r.encode()
		b.Queue(`UPDATE `+t.p.table+` SET kind = $2, owner_id = $3, expires_at = $4, token = $5, rev = rev + 1, state = $6 WHERE name = $1`,
			r.name, w.kind, w.owner, w.expires, int64(r.token), w.state)
	}
	for _, n := range notices {
		b.Queue(`SELECT pg_notify($1, $2)`, t.p.table, n.encode())
	}
	if relaxed {
		b.Queue(`SET LOCAL synchronous_commit = off`)
	}
	b.Queue(`COMMIT`)
	br := t.c.SendBatch(ctx, b)
	var err error
	for range b.Len() - 1 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("transaction ended with %s", tag)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

func (t *pgTx) rollback() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = t.c.Exec(ctx, `ROLLBACK`)
	t.c.Release() // a connection left in a transaction is closed by the pool
}

func (p *postgres) create(ctx context.Context, names []string) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO `+p.table+` (name) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, names)
	return err
}

func (p *postgres) read(ctx context.Context, names []string) ([]*row, int64, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT ` + pgClock)
	b.Queue(`SELECT name, token, rev, state FROM `+p.table+` WHERE name = ANY($1)`, names)
	br := p.pool.SendBatch(ctx, b)
	defer br.Close()
	var now int64
	if err := br.QueryRow().Scan(&now); err != nil {
		return nil, 0, err
	}
	q, err := br.Query()
	if err != nil {
		return nil, 0, err
	}
	rows, _, err := scanRows(q, false)
	return rows, now, err
}

func (p *postgres) held(ctx context.Context) ([]string, error) {
	q, err := p.pool.Query(ctx, `SELECT name FROM `+p.table+` WHERE expires_at > clock_timestamp()`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(q, pgx.RowTo[string])
}

func (p *postgres) retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

func (p *postgres) missingTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}

// readOnly: SQLSTATE 25006, read_only_sql_transaction (a standby in
// recovery, or default_transaction_read_only).
func (p *postgres) readOnly(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006"
}

// listen implements listener, on a connection of its own made with the
// pool's settings.
func (p *postgres) listen(ctx context.Context, up func(), got func(string)) error {
	c, err := pgx.ConnectConfig(ctx, p.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Close(cctx)
	}()
	if _, err := c.Exec(ctx, `LISTEN `+pgx.Identifier{p.table}.Sanitize()); err != nil {
		return err
	}
	up()
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		got(n.Payload)
	}
}

// decodeState reads a row's state column.
func decodeState(r *row, state string) error {
	r.raw = state
	if state == "" || state == "{}" {
		return nil
	}
	if err := json.Unmarshal([]byte(state), &r.state); err != nil {
		return fmt.Errorf("unreadable state of lock %q: %w", r.name, err)
	}
	return nil
}

func (t *pgTx) saveOnce(ctx context.Context, name string, rec store.Record, keep time.Duration) error {
	_, err := t.c.Exec(ctx, `INSERT INTO `+t.p.table+`_once (name, period, token, at, pid, host, err, keep_until)
		VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp() + $8 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE SET period = EXCLUDED.period, token = EXCLUDED.token, at = EXCLUDED.at,
			pid = EXCLUDED.pid, host = EXCLUDED.host, err = EXCLUDED.err, keep_until = EXCLUDED.keep_until`,
		name, int64(rec.Period), int64(rec.Token), rec.At, rec.PID, rec.Host, rec.Err, keep.Microseconds())
	return err
}

func (p *postgres) onceRead(ctx context.Context, name string) (int64, store.Record, bool, error) {
	var now int64
	var period, token *int64
	var at *time.Time
	var pid *int32
	var host, text *string
	err := p.pool.QueryRow(ctx, `SELECT `+pgClock+`, o.period, o.token, o.at, o.pid, o.host, o.err
		FROM (SELECT 1) one LEFT JOIN `+p.table+`_once o ON o.name = $1 AND o.keep_until > clock_timestamp()`, name).
		Scan(&now, &period, &token, &at, &pid, &host, &text)
	if err != nil || period == nil || token == nil || at == nil || pid == nil || host == nil || text == nil {
		return now, store.Record{}, false, err
	}
	return now, store.Record{Period: uint64(*period), Token: uint64(*token), At: *at, PID: int(*pid), Host: *host,
		Err: *text}, true, nil
}

func (p *postgres) onceForget(ctx context.Context, name string) (bool, error) {
	var live []bool
	q, err := p.pool.Query(ctx, `DELETE FROM `+p.table+`_once WHERE name = $1 RETURNING keep_until > clock_timestamp()`, name)
	if err == nil {
		live, err = pgx.CollectRows(q, pgx.RowTo[bool])
	}
	return len(live) > 0 && live[0], err
}

// takeFree implements fastPath.
func (p *postgres) takeFree(ctx context.Context, r store.Request, f freeTake) (uint64, bool, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return 0, false, err
	}
	defer c.Release()
	var token int64
	err = c.QueryRow(ctx, `WITH c AS (SELECT `+pgClock+` AS us)
		UPDATE `+p.table+` t SET kind = 'mutex', owner_id = $2, token = GREATEST(t.token + 1, c.us), rev = t.rev + 1,
			expires_at = 'epoch'::timestamptz + (c.us + $3) * interval '1 microsecond',
			state = $4 || GREATEST(t.token + 1, c.us)::text || $5 || (c.us + $3)::text || $6 || (c.us / 1000)::text || $7
		FROM c WHERE t.name = $1 AND t.state = '{}'
		RETURNING t.token`,
		r.Name, store.OwnerID(r.Owner), f.lease, f.beforeToken, f.beforeUntil, f.beforeSince, f.end).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return uint64(token), err == nil, pgErr(err)
}

// acquire takes a connection of the pool: failing, nothing was sent.
func (p *postgres) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, unsent(err)
	}
	return c, nil
}

// pgErr marks the failure of a statement (in a transaction of its own)
// that certainly did not apply: it was never sent, or the server refused
// it with an ERROR, which rolls its transaction back.
func pgErr(err error) error {
	var pe *pgconn.PgError
	if err != nil && (pgconn.SafeToRetry(err) || errors.As(err, &pe) && pe.Severity == "ERROR") {
		return unsent(err)
	}
	return err
}

// releaseOnly implements fastPath. It frees a mutex whose release is to
// be told (lockState.Waited) too, and then tells it, in the same
// statement, by pg_notify, as the general path's step would: a contended
// lock is released in one round trip, without a transaction holding its
// row locked across another. For a release that tells nothing, the CASE
// costs a LIKE on the state's text, and no parse (a string's quotes are
// escaped: "waited": appears in a state only as the key). When the statement waited
// for the row (another step changed it meanwhile), PostgreSQL evaluates
// its WHERE and SET again on the row's latest version, so the notice
// follows the state that it frees (the notifying subquery refers to the
// row so as to be evaluated with it, not once for the statement, which
// PostgreSQL would do whenever the statement waits; the version read
// before the wait may still have sent a notice that wakes waiters for
// nothing).
func (p *postgres) releaseOnly(ctx context.Context, r store.Request, tell notice) (bool, error) {
	holds := `[{"id":` + strconv.FormatUint(r.Hold, 10) + `,"side":109}]`
	if r.Hold == 0 {
		holds = ""
	}
	// A release that grants nothing may be lost in a crash: the lock then
	// stays held until its lease ends (see step.relaxed).
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL synchronous_commit = off`)
	b.Queue(`UPDATE `+p.table+` SET kind = '', owner_id = NULL, expires_at = NULL, rev = rev + 1,
			state = CASE WHEN state LIKE '%"waited":%' AND (state::jsonb ->> 'waited')::bigint > `+pgClock+`
				THEN (SELECT '{}' FROM pg_notify($4, $5) WHERE state IS NOT NULL) ELSE '{}' END
		WHERE name = $1 AND kind = 'mutex'
			AND state::jsonb - 'holders' - 'waited' = '{"kind":"mutex"}'::jsonb
			AND jsonb_array_length(state::jsonb -> 'holders') = 1
			AND state::jsonb #>> '{holders,0,owner}' = $2
			AND ($3 = '' OR state::jsonb #> '{holders,0,holds}' = $3::jsonb)
			AND (state::jsonb #>> '{holders,0,until}')::bigint > `+pgClock,
		r.Name, r.Owner, holds, p.table, tell.encode())
	b.Queue(`COMMIT`)
	c, err := p.acquire(ctx)
	if err != nil {
		return false, err
	}
	defer c.Release()
	br := c.SendBatch(ctx, b)
	defer br.Close()
	var n int64
	for i := range 4 {
		tag, err := br.Exec()
		if err != nil {
			return false, pgErr(err)
		}
		if i == 2 {
			n = tag.RowsAffected()
		}
	}
	return n == 1, nil
}
