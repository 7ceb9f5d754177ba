package pglander

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/ubiksql/ubik/land"
)

// Errors of the package.
var (
	ErrNoPool = errors.New("pglander: no pool")
)

// configErr returns land.ErrConfig naming what to check when the server's
// SQLSTATE points at the configuration, nil otherwise. An admin shutdown
// (57P01), a server that cannot take connections yet (57P03), a
// serialization failure or deadlock (40001, 40P01) stay transient.
func configErr(err error, table string) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil
	}
	var check string
	switch {
	case pe.Code == "42501":
		check = "the lander's role needs SELECT, INSERT and UPDATE on " + table
	case pe.Code == "42P01" || pe.Code == "3F000":
		check = "the table " + table + " must exist (the lander creates it at start unless told not to)"
	case pe.Code == "42703" || pe.Code == "42P10" || pe.Code == "42804":
		check = "the columns and primary key of " + table + " must be the lander's (pglander's package doc)"
	case strings.HasPrefix(pe.Code, "28"):
		check = "the user name and password in the connection string"
	case pe.Code == "3D000":
		check = "the database named in the connection string"
	case pe.Code == "25006":
		check = "the connection string must reach a writable primary, not a read-only server or replica"
	case strings.HasPrefix(pe.Code, "42"):
		check = "the table " + table + " and the lander's role"
	default:
		return nil
	}
	return fmt.Errorf("%w: PostgreSQL: %s (SQLSTATE %s); check: %s", land.ErrConfig, pe.Message, pe.Code, check)
}
