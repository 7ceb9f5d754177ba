package redislander

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/ubiksql/ubik/land"
)

// Errors of the package.
var (
	ErrNoClient = errors.New("redislander: no client")
	ErrReply    = errors.New("redislander: unexpected reply")
)

// configErr returns err as land.ErrConfig, naming what to check, when the
// server's error code (the first word of its error reply) points at the
// configuration: NOPERM (the ACL user lacks a command or key), WRONGPASS,
// NOAUTH. Every other reply, and a server out of reach, is returned as is.
func configErr(err error) error {
	var re redis.Error
	if !errors.As(err, &re) {
		return err
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	var check string
	switch code {
	case "NOPERM":
		check = "the ACL user's permissions: it needs FCALL (or EVALSHA), FUNCTION LOAD (or SCRIPT LOAD), HMGET and HSET, " +
			"and with Optimistic WATCH, MULTI and EXEC, on the keys of its prefix"
	case "WRONGPASS", "NOAUTH":
		check = "the user name and password"
	default:
		return err
	}
	return fmt.Errorf("%w: Redis %s; check: %s: %w", land.ErrConfig, code, check, err)
}
