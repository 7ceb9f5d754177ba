package redislander

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// aclUser creates an ACL user on the test server with password pw and
// rules, deleted at the end, and returns a client logged in as it.
func aclUser(t *testing.T, admin *redis.Client, pw string, rules ...any) (string, *redis.Client) {
	t.Helper()
	ctx := context.Background()
	user := testenv.Name(t, "ubik")
	args := append([]any{"ACL", "SETUSER", user, "reset", "on", ">" + pw, "~*"}, rules...)
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, DB: testDB, Username: user, Password: pw,
		MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return user, c
}

// TestConfigErrorStops: an ACL user without the command the lander needs,
// and a user whose password no longer holds, stop land.Run within seconds,
// naming Redis's reason and what to check, where they were retried
// forever.
func TestConfigErrorStops(t *testing.T) {
	admin := client(t, testenv.RequireRedis(t))
	ctx := context.Background()
	for _, optimistic := range []bool{false, true} {
		name := map[bool]string{false: "Function", true: "Optimistic"}[optimistic]
		t.Run("NoPermission"+name, func(t *testing.T) {
			// FUNCTION LOAD is allowed (New succeeds), FCALL and HSET are
			// not: the guard cannot write.
			_, c := aclUser(t, admin, "pw", "+@all", "-fcall", "-evalsha", "-hset")
			l := openWith(t, Options{Client: c, Mode: land.Latest, Prefix: testenv.Name(t, "cfg") + "/", Optimistic: optimistic})
			landtest.RequireConfigStop(t, l, "NOPERM", "ACL user's permissions")
		})
	}
	t.Run("UserDeleted", func(t *testing.T) {
		user, c := aclUser(t, admin, "pw", "+@all")
		l := openWith(t, Options{Client: c, Mode: land.Latest, Prefix: testenv.Name(t, "cfg") + "/"})
		// Deleting the user closes its connections: the lander's next
		// connection fails to log in.
		if err := admin.Do(ctx, "ACL", "DELUSER", user).Err(); err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, l, "WRONGPASS", "user name and password")
	})
}

// TestConfigErrCodes: the error codes of a configuration are ErrConfig;
// other replies, and a refused connection, are not.
func TestConfigErrCodes(t *testing.T) {
	admin := client(t, testenv.RequireRedis(t))
	for code, want := range map[string]bool{"NOPERM": true, "WRONGPASS": true, "NOAUTH": true, "LOADING": false,
		"BUSY": false, "MASTERDOWN": false, "TRYAGAIN": false, "ERR": false} {
		// A real error reply of the server: ERROR-style replies from a script.
		err := admin.Eval(context.Background(), "return redis.error_reply(ARGV[1])", nil, code+" m").Err()
		if err == nil {
			t.Fatal("no error reply")
		}
		if got := errors.Is(configErr(err), land.ErrConfig); got != want {
			t.Errorf("%s: configuration error %v, want %v (%v)", code, got, want, err)
		}
	}
	if errors.Is(configErr(errors.New("dial tcp: connection refused")), land.ErrConfig) {
		t.Error("a refused connection is a configuration error")
	}
}
