package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsNeverPrinted: a password in SQL (a broker's user-info, or an
// option whose name says password) is printed neither by explain nor in
// the error of run or explain, caret line included.
func TestSecretsNeverPrinted(t *testing.T) {
	const pw = "S3cretPW"
	dir := t.TempDir()
	write := func(name, with string) string {
		p := filepath.Join(dir, name)
		sql := "CREATE SOURCE s (k VARCHAR, n BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)\n" +
			"WITH (connector='kafka', topic='t', format='json', " + with + ");\nSELECT k, sum(n) AS total FROM s GROUP BY k;\n"
		if err := os.WriteFile(p, []byte(sql), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	userinfo := write("userinfo.sql", "brokers='u:"+pw+"@127.0.0.1:1'")
	option := write("option.sql", "brokers='127.0.0.1:1', sasl_password='"+pw+"'")
	for _, c := range []struct {
		what string
		args []string
		code int
	}{
		{"explain of a broker with user-info", []string{"explain", userinfo}, 0},
		{"run of a broker with user-info", []string{"run", userinfo}, 1},
		{"explain of sasl_password", []string{"explain", option}, 1},
		{"run of sasl_password", []string{"run", option}, 1},
	} {
		out, errOut, code := runCLI(t, "", c.args...)
		if code != c.code || strings.Contains(out+errOut, pw) {
			t.Errorf("%s: exit %d (want %d), printed the password:\n%s%s", c.what, code, c.code, out, errOut)
		}
	}
	out, _, _ := runCLI(t, "", "explain", userinfo)
	if !strings.Contains(out, `brokers="u:xxx@127.0.0.1:1"`) {
		t.Errorf("explain does not show the redacted broker:\n%s", out)
	}
	_, errOut, _ := runCLI(t, "", "explain", option)
	if !strings.Contains(errOut, "sasl_password='********'") || !strings.Contains(errOut, "^") {
		t.Errorf("the caret line does not show the masked option:\n%s", errOut)
	}
}

func TestRedactWriter(t *testing.T) {
	var b bytes.Buffer
	w := redactWriter{&b}
	line := "level=WARN msg=x brokers=a:hunter2@h:1 sasl_password=\"hunter2\"\n"
	if n, err := w.Write([]byte(line)); n != len(line) || err != nil || strings.Contains(b.String(), "hunter2") {
		t.Fatalf("wrote %d %v: %s", n, err, b.String())
	}
}
