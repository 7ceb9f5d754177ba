package cli

import (
	"context"
	"strings"
	"testing"
	"time"
)

// runCtx runs the CLI in process with a deadline, so an error path that
// would retry a store forever fails the test instead of hanging it.
func runCtx(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env, out, errb := runTestEnv("")
	code := Main(ctx, env, args)
	return out.String(), errb.String(), code
}

// TestStoreURLOptionsRefused: a table name or URL option that does not
// parse, or that the store does not take, is refused before anything is
// written, by every lander and by ubik usage.
func TestStoreURLOptionsRefused(t *testing.T) {
	from := []string{"land", "--from", "kafka://127.0.0.1:1/t", "--mode", "latest", "--to"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(from, "postgres://u@127.0.0.1:1/db?table=bad;name"), "invalid semicolon separator"},
		{append(from, "postgres://u@127.0.0.1:1/db?table=bad%3Bname"), `"bad;name"`},
		{append(from, "postgres://u@127.0.0.1:1/db?table=t&tabel=u"), `unknown option "tabel" (did you mean "table"?)`},
		{append(from, "postgres://u@127.0.0.1:1/db?table=a&table=b"), `option "table" is given 2 times`},
		{append(from, "postgres://u@127.0.0.1:1/db?table=t&fillfactor=9"), `fillfactor "9" is not an integer from 10 to 100`},
		{append(from, "postgres://u@127.0.0.1:1/db?table=t&fillfactor=70%25"), `fillfactor "70%" is not an integer from 10 to 100`},
		{append(from, "postgres://u@127.0.0.1:1/db?table=t&fillfactor=101"), `fillfactor "101" is not an integer from 10 to 100`},
		{append(from, "clickhouse://127.0.0.1:1/default?table=bad;name"), "invalid semicolon separator"},
		{append(from, "clickhouse://127.0.0.1:1/default?table=a-b"), "must be plain identifiers"},
		{append(from, "clickhouse://127.0.0.1:1/default?tabel=t"), `unknown option "tabel"`},
		{append(from, "dynamodb://127.0.0.1:1/t?regoin=eu-west-1"), `unknown option "regoin" (did you mean "region"?)`},
		{append(from, "dynamodb://127.0.0.1:1/t?region=a;b"), "invalid semicolon separator"},
		{append(from, "redis://127.0.0.1:1/0?prefix=a;b"), "invalid semicolon separator"},
		{append(from, "redis://127.0.0.1:1/0?prefx=a"), "unexpected option"},
		{append(from, "redis://127.0.0.1:1/0?prefix=a&prefix=b"), `option "prefix" is given 2 times`},
		{[]string{"usage", "list", "--store", "postgres://u@127.0.0.1:1/db?sslmode=disable;x"}, "invalid semicolon separator"},
		{[]string{"usage", "list", "--store", "postgres://u@127.0.0.1:1/db?sslmod=disable"}, `unknown option "sslmod" (did you mean "sslmode"?)`},
		{[]string{"usage", "list", "--store", "clickhouse://127.0.0.1:1/db?secur=true"}, `unknown option "secur" (did you mean "secure"?)`},
		{[]string{"usage", "list", "--store", "postgres://u@127.0.0.1:1/db", "--table", "bad;name"}, "bad;name"},
	} {
		_, errb, code := runCtx(t, c.args...)
		if code == 0 || !strings.Contains(errb, c.want) {
			t.Errorf("ubik %s: exit %d, stderr lacks %q:\n%s", strings.Join(c.args, " "), code, c.want, errb)
		}
	}
}

// TestNoSecretInErrors: no command prints a password it was given in a
// URL, on any error path: a URL that does not parse, a bad option, a store
// that is not there, a store that refuses the password.
func TestNoSecretInErrors(t *testing.T) {
	const pw = "PASSWORD7x"
	pg := envOr("UBIK_PG_DSN", "postgres://ubik@127.0.0.1:5432/ubik?sslmode=disable")
	pgHost := pg[strings.Index(pg, "@")+1:]
	pgHost = pgHost[:strings.Index(pgHost, "/")]
	redisAddr := envOr("UBIK_REDIS_ADDR", "127.0.0.1:6379")
	lands := []string{
		"postgres://u:" + pw + "@127.0.0.1:1/db?table=t&sslmode=disable",
		"postgres://ubik:" + pw + "@" + pgHost + "/ubik?table=t&sslmode=disable",
		"postgres://u:" + pw + "@127.0.0.1:1/db?table=bad;name",
		"postgres://u:" + pw + "@127.0.0.1:1/db?bogus=1",
		"postgres://u:" + pw + "@127.0.0.1:1/db?password=" + pw + "&bogus=1",
		"postgres://u:" + pw + "@[::1/db",
		"redis://:" + pw + "@127.0.0.1:1/0",
		"redis://:" + pw + "@" + redisAddr + "/0",
		"redis://:" + pw + "@127.0.0.1:1/0?bogus=1",
		"redis://:" + pw + "@127.0.0.1:1/x",
		"clickhouse://u:" + pw + "@127.0.0.1:1/default?table=t",
		"clickhouse://u:" + pw + "@127.0.0.1:1/default?table=a;b",
		"dynamodb://u:" + pw + "@127.0.0.1:1/t?bogus=1",
		"ftp://u:" + pw + "@h/x",
	}
	var cmds [][]string
	for _, to := range lands {
		cmds = append(cmds, []string{"land", "--from", "kafka://127.0.0.1:1/t", "--mode", "latest", "--to", to})
	}
	for _, from := range []string{"kafka://user:" + pw + "@127.0.0.1:1/t", "kafka://user:" + pw + "@h:1/", "http://u:" + pw + "@h/t"} {
		cmds = append(cmds, []string{"land", "--from", from, "--mode", "latest", "--to", "redis://" + redisAddr + "/0"})
	}
	for _, store := range []string{
		"postgres://u:" + pw + "@127.0.0.1:1/db?sslmode=disable",
		"postgres://ubik:" + pw + "@" + pgHost + "/ubik?sslmode=disable",
		"postgres://u:" + pw + "@127.0.0.1:1/db?bogus=1",
		"clickhouse://u:" + pw + "@127.0.0.1:1/default",
		"clickhouse://u:" + pw + "@127.0.0.1:1/default?bogus=1",
		"mysql://u:" + pw + "@h/db",
	} {
		cmds = append(cmds, []string{"usage", "get", "--key", "k", "--store", store})
	}
	for _, to := range []string{"kafka://user:" + pw + "@127.0.0.1:1/t", "kafka://127.0.0.1:1/t?sasl_password=" + pw, "http://u:" + pw + "@h/t"} {
		cmds = append(cmds, []string{"produce", "--to", to})
	}
	sql := writeFile(t, "q.sql", evSQL)
	for _, u := range []string{"kafka://user:" + pw + "@127.0.0.1:1/t", "kafka://127.0.0.1:1/t?sasl_password=" + pw, "postgres://u:" + pw + "@h/db", "kafka://u:" + pw + "@[::1/t"} {
		cmds = append(cmds, []string{"run", sql, "--source", u, "--sink", "kafka://127.0.0.1:1/out"},
			[]string{"run", sql, "--source", "kafka://127.0.0.1:1/in", "--sink", u})
	}
	for _, args := range cmds {
		out, errb, code := runCtx(t, args...)
		if code == 0 {
			t.Errorf("ubik %s: exit 0", strings.Join(args, " "))
		}
		if strings.Contains(out+errb, pw) {
			t.Errorf("ubik %s printed the password:\n%s%s", strings.Join(args, " "), out, errb)
		}
	}
}
