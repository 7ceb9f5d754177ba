package parser

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		`WITH (connector='kafka', brokers='u:PW@host:9092')`:                  `WITH (connector='kafka', brokers='u:xxx@host:9092')`,
		`brokers='a:P1@h1:1,b:P2@h2:2'`:                                       `brokers='a:xxx@h1:1,b:xxx@h2:2'`,
		`broker "u:p@ss:w0rd@127.0.0.1:1" is not host:port`:                   `broker "u:xxx@127.0.0.1:1" is not host:port`,
		`postgres://user:s3cr%2Ft@db:5432/x?sslmode=disable`:                  `postgres://user:xxx@db:5432/x?sslmode=disable`,
		`WITH (sasl_password = 'PW', SASL_Password="x y")`:                    `WITH (sasl_password = 'xxx', SASL_Password="xxx")`,
		`api_token: 'it''s'`:                                                  `api_token: 'xxx'`,
		`clickhouse://h:8123/db?password=PW&table=t`:                          `clickhouse://h:8123/db?password=xxx&table=t`,
		`x?aws_secret_access_key=K`:                                           `x?aws_secret_access_key=xxx`,
		`line 2:75: source option "sasl_password": a password is never taken`: `line 2:75: source option "sasl_password": a password is never taken`,
		`mail me at someone@example.com, at 10:00:01`:                         `mail me at someone@example.com, at 10:00:01`,
		`http://host:8123/db`:                                                 `http://host:8123/db`,
		`WHERE token_count = 5`:                                               `WHERE token_count = 5`,
		`sasl_password='**'`:                                                  `sasl_password='**'`,
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%s)\n got %s\nwant %s", in, got, want)
		}
	}
}

// Property: a generated secret, in every syntax it can be written in, never
// survives Redact or Mask, and Mask keeps the character count.
func TestRedactNeverLeaks(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	const chars = "abcXYZ019!#$%^*+-_.~:@;?&=ü€"
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for n := 3 + r.Intn(12); n > 0; n-- {
			b.WriteRune([]rune(chars)[r.Intn(utf8.RuneCountInString(chars))])
		}
		pw := "Q" + b.String() + "Z" // starts and ends unlike the syntax around it
		key := []string{"sasl_password", "Secret", "api_TOKEN", "passwd", "client_secret_key"}[r.Intn(5)]
		texts := []string{
			"WITH (brokers='user:" + pw + "@h:1,h2:2')",
			`broker "u:` + pw + `@127.0.0.1:9092" is not host:port`,
			"kafka://u:" + pw + "@host:9092/topic",
			key + "='" + strings.ReplaceAll(pw, "'", "''") + "'",
			key + ` = "` + pw + `"`,
		}
		if !strings.ContainsAny(pw, "&#") {
			texts = append(texts, "pg://h/db?x=1&"+key+"="+pw+"&y=2")
		}
		for _, text := range texts {
			if got := Redact(text); strings.Contains(got, pw[1:len(pw)-1]) {
				t.Fatalf("Redact(%s) = %s: the secret is still there", text, got)
			}
			m := Mask(text)
			if strings.Contains(m, pw[1:len(pw)-1]) || utf8.RuneCountInString(m) != utf8.RuneCountInString(text) {
				t.Fatalf("Mask(%s) = %s", text, m)
			}
		}
	}
}

// An error on a line that holds a password: the caret line masks it and
// the caret still points at the same column; the message never quotes it.
func TestErrorCaretMasksSecrets(t *testing.T) {
	sql := "CREATE SOURCE s (a INT)\nWITH (brokers='u:PÄSS@h:1',\tsasl_password='PW', bad_option='v');"
	pos := strings.Index(sql, "bad_option")
	e := Errorf(sql, pos, "unknown option %q in WITH (brokers='u:PÄSS@h:1')", "bad_option")
	c := e.Caret()
	if strings.Contains(c, "PÄSS") || strings.Contains(c, "PW") || strings.Contains(e.Error(), "PÄSS") {
		t.Fatalf("secret printed:\n%s\n%s", e.Error(), c)
	}
	lines := strings.Split(c, "\n")
	line, caret := []rune(lines[0]), []rune(lines[1])
	if len(caret) == 0 || string(line[len(caret)-1:len(caret)-1+len("bad_option")]) != "bad_option" {
		t.Fatalf("caret no longer under the error:\n%s", c)
	}
}
