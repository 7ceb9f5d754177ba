package cli

import (
	"context"
	"strings"
	"testing"
)

// TestUnknownSourceHintsInfer: a script that reads a source it does not
// declare says how to get a CREATE SOURCE (run's --infer, ubik infer); a
// misspelt source that the script declares under another name does not.
func TestUnknownSourceHintsInfer(t *testing.T) {
	sql := writeFile(t, "q.sql", "SELECT merchant, count(*) AS n FROM events GROUP BY merchant")
	for _, c := range []struct {
		cmd, want string
	}{
		{"run", "no CREATE SOURCE declares events: add --infer to infer it from the first records of the input"},
		{"explain", "no CREATE SOURCE declares events: ubik infer FILE --name events prints one"},
	} {
		env, _, errb := runTestEnv("")
		if code := Main(context.Background(), env, []string{c.cmd, sql}); code != ExitError || !strings.Contains(errb.String(), `unknown source "events"`) || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: exit %d, want %d and %q:\n%s", c.cmd, code, ExitError, c.want, errb)
		}
	}
	// Declared under another name: the error is the SQL's, not a missing
	// declaration's.
	env, _, errb := runTestEnv("")
	other := writeFile(t, "o.sql", "CREATE SOURCE events (merchant VARCHAR) WITH (format = 'jsonl');\nSELECT merchant, count(*) AS n FROM event GROUP BY merchant")
	if code := Main(context.Background(), env, []string{"run", other}); code != ExitError || strings.Contains(errb.String(), "--infer") {
		t.Errorf("declared source: exit %d, want %d and no --infer hint:\n%s", code, ExitError, errb)
	}
}
