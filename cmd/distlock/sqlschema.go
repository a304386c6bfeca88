package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/distlock/distlock/sqlstore"
)

var sqlSchemaCommand = &command{
	name:     "sql-schema",
	synopsis: "postgres|mysql [--table NAME]",
	summary:  "print the SQL that creates the tables of a SQL store",
	doc: `Sql-schema prints the SQL statements that create the tables of the locks
on PostgreSQL (postgres) or on MariaDB and MySQL (mysql), for teams that
apply their schema changes with their own migrations. It contacts no
database. The statements are idempotent (CREATE TABLE IF NOT EXISTS).

The store makes the tables itself, on first use, when they are missing:
a user that may create tables needs nothing else. A user that may only
read and write needs them made beforehand, with this schema. --table
must match the table parameter of the store's URL; the second table is
named after it, with "_once" added.
`,
	examples: `  distlock sql-schema postgres | psql "$DATABASE_URL"
  distlock sql-schema mysql --table app_locks | mariadb app
  distlock sql-schema postgres > migrations/0042_distlock.sql
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		table := fs.String("table", sqlstore.DefaultTable,
			"`NAME` of the table, as in the table parameter of the store's URL:\n"+
				"lower-case letters, digits and underscores, optionally\n"+
				"SCHEMA.TABLE")
		return func(line commandLine) error {
			if len(line.args) != 1 {
				return usageErrorf("want one database: postgres or mysql (see distlock sql-schema --help)")
			}
			if err := checkTable(*table); err != nil {
				return usageErrorf("invalid value for --table: %v", err)
			}
			var (
				schema string
				err    error
			)
			switch strings.ToLower(line.args[0]) {
			case "postgres", "postgresql":
				schema, err = sqlstore.PostgresSchema(sqlstore.WithTable(*table))
			case "mysql", "mariadb":
				schema, err = sqlstore.MySQLSchema(sqlstore.WithTable(*table))
			default:
				return usageErrorf("unknown database %q: want postgres or mysql (mysql is also MariaDB's)", line.args[0])
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(os.Stdout, schema)
			return err
		}
	},
}
