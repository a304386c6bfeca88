package sqlstore_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// LockTx takes a lock for the length of a transaction: here, to close the
// month of invoices, whichever process runs the job. The write is fenced
// by the token, as the writes of the lease locks of the same name (a
// Mutex's Lease.Token) are: a lease holder that outlived its lease, with
// a lower token, can no longer overwrite it.
func ExampleStore_LockTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locks := sqlstore.NewPostgres(pool)
	defer locks.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // after Commit, does nothing

	token, err := locks.LockTx(ctx, tx, "invoices/close-month")
	if errors.Is(err, distlock.ErrNotAcquired) {
		log.Print("someone holds the lock with a lease: try later")
		return
	}
	if err != nil {
		log.Fatal(err)
	}

	// Fenced: only a token above the last one written goes through. The
	// write commits with the lock's end, or not at all.
	tag, err := tx.Exec(ctx, `UPDATE months SET closed = true, fence = $1
		WHERE month = date_trunc('month', now()) AND fence < $1`, int64(token))
	if err != nil {
		log.Fatal(err)
	}
	if tag.RowsAffected() == 0 {
		log.Print("a holder with a later token wrote already")
		return
	}
	if err := tx.Commit(ctx); err != nil { // releases the lock
		log.Fatal(err)
	}
}
