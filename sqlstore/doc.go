// Package sqlstore keeps distlock's locks in a SQL database: PostgreSQL
// (through a pgx pool) or MariaDB and MySQL (through database/sql).
package sqlstore
