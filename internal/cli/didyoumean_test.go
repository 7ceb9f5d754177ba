package cli

import (
	"context"
	"strings"
	"testing"
)

// TestDidYouMean: a mistyped command, usage subcommand or flag is a usage
// error that names the closest known one; one close to none gets no
// suggestion.
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"rnu"}, `unknown command "rnu" (did you mean "run"?)`, ""},
		{[]string{"help", "lnad"}, `unknown command "lnad" (did you mean "land"?)`, ""},
		{[]string{"usage", "agregate"}, `unknown usage subcommand "agregate" (did you mean "aggregate"?)`, ""},
		{[]string{"run", "q.sql", "--inptu", "x"}, `-inptu (did you mean "--input"?)`, ""},
		{[]string{"run", "q.sql", "-outptu=x"}, `-outptu (did you mean "--output"?)`, ""},
		{[]string{"land", "--form", "kafka://h:1/t"}, `-form (did you mean "--from"?)`, ""},
		{[]string{"explain", "q.sql", "--qeury", "x"}, `-qeury (did you mean "--query"?)`, ""},
		{[]string{"run", "q.sql", "--zzzzzzzz"}, "flag provided but not defined: -zzzzzzzz (ubik run --help", "did you mean"},
		{[]string{"xyzzyq"}, `unknown command "xyzzyq"`, "did you mean"},
	} {
		env, _, errb := runTestEnv("")
		code := Main(context.Background(), env, c.args)
		if code != ExitUsage || !strings.Contains(errb.String(), c.want) || c.not != "" && strings.Contains(errb.String(), c.not) {
			t.Errorf("%q: exit %d, want %d and %q:\n%s", c.args, code, ExitUsage, c.want, errb)
		}
	}
}
