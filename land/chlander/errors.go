package chlander

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/chhttp"
)

// ErrReply is wrapped by a reply the lander cannot read. A server's error
// answer is a *chhttp.ServerError.
var ErrReply = errors.New("chlander: unexpected reply")

// configCheck returns what to check (with {table} and {database} to fill in)
// for ClickHouse's error codes that point at the configuration,
// "" for every other code: those, and a failure to reach the server, stay
// transient.
func configCheck(code int) string {
	switch code {
	case 16, 47: // NO_SUCH_COLUMN_IN_TABLE, UNKNOWN_IDENTIFIER
		return "the columns of {table} must be the lander's (chlander's package doc)"
	case 60: // UNKNOWN_TABLE
		return "the table {table} must exist (the lander creates it at start unless told not to)"
	case 81: // UNKNOWN_DATABASE
		return "the database {database} must exist"
	case 164: // READONLY
		return "the user must not be read-only (its profile's readonly setting)"
	case 192, 193, 194, 516: // UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, AUTHENTICATION_FAILED
		return "the user name and password"
	case 195: // IP_ADDRESS_NOT_ALLOWED
		return "the networks the user may connect from"
	case 242: // TABLE_IS_READ_ONLY
		return "the table {table} is read-only on this server"
	case 291: // DATABASE_ACCESS_DENIED
		return "the databases the user may use"
	case 497: // ACCESS_DENIED
		return "the user's grants on {table} (INSERT and SELECT)"
	}
	return ""
}

// configErr returns err as land.ErrConfig, naming what to check, when
// ClickHouse's error code points at the configuration; err otherwise.
func (l *Lander) configErr(err error) error {
	var se *chhttp.ServerError
	if !errors.As(err, &se) {
		return err
	}
	check := configCheck(se.Code())
	if check == "" {
		return err
	}
	return fmt.Errorf("%w: ClickHouse error %d; check: %s: %w", land.ErrConfig, se.Code(),
		strings.NewReplacer("{table}", l.table, "{database}", l.o.Database).Replace(check), err)
}
