package sqltest_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/distlock/distlock/sqltest"
)

// This example starts a PostgreSQL and a MariaDB server outside a test,
// queries each and stops them. In a test, use StartPostgres and
// StartMariaDB, which stop the servers when the test ends.
func Example() {
	ctx := context.Background()

	pg, err := sqltest.NewPostgres()
	if err != nil {
		log.Fatal(err)
	}
	defer pg.Stop()
	conn, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 1 + 1").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("postgres:", n)

	m, err := sqltest.NewMariaDB()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Stop()
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, "SELECT 1 + 1").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("mariadb:", n)
	// Output:
	// postgres: 2
	// mariadb: 2
}
