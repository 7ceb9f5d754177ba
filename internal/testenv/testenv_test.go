package testenv

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	a, b := Name(t, "Pg-Table"), Name(t, "Pg-Table")
	if a == b {
		t.Fatalf("two names are equal: %q", a)
	}
	for _, n := range []string{a, b, Name(t, ""), Name(t, "9lives"), Name(t, strings.Repeat("x", 100))} {
		if !valid.MatchString(n) || len(n) > 48 {
			t.Errorf("Name gave %q: want [a-z][a-z0-9_]*, at most 48 bytes", n)
		}
	}
	if !strings.HasPrefix(a, "pg_table_testname_") {
		t.Errorf("Name(%q) = %q, want the prefix and the test's name first", "Pg-Table", a)
	}
}

func TestDefaults(t *testing.T) {
	for _, v := range []string{EnvRedisAddr, EnvPGDSN, EnvClickHouseURL, EnvDynamoDBEndpoint, EnvKafkaBrokers} {
		t.Setenv(v, "")
	}
	if RedisAddr() != DefaultRedisAddr || PGDSN() != DefaultPGDSN || ClickHouseURL() != DefaultClickHouseURL ||
		DynamoDBEndpoint() != DefaultDynamoDBEndpoint || len(KafkaBrokers()) != 1 {
		t.Fatal("an unset variable does not give its default")
	}
	t.Setenv(EnvKafkaBrokers, " a:1, b:2 ,")
	if got := KafkaBrokers(); len(got) != 2 || got[0] != "a:1" || got[1] != "b:2" {
		t.Fatalf("KafkaBrokers = %q", got)
	}
	t.Setenv(EnvClickHouseURL, "http://x:1/")
	if ClickHouseURL() != "http://x:1" {
		t.Fatalf("ClickHouseURL kept the trailing slash: %q", ClickHouseURL())
	}
}

func TestPGAddr(t *testing.T) {
	got, err := pgAddr("postgres://u:secret@db.example:6543/x?sslmode=disable")
	if err != nil || got != "db.example:6543" {
		t.Fatalf("pgAddr = %q, %v", got, err)
	}
	if _, err := pgAddr("host=x user=y"); err == nil || strings.Contains(err.Error(), "user=y") {
		t.Fatalf("a keyword DSN must be refused without echoing it: %v", err)
	}
}

// TestProbesRefuseWrongServers points each probe at a server of another kind.
func TestProbesRefuseWrongServers(t *testing.T) {
	redis := RequireRedis(t)
	if err := probePostgres(redis, 300*time.Millisecond); err == nil {
		t.Error("probePostgres accepted Redis")
	}
	if err := probeKafka(redis, 300*time.Millisecond); err == nil {
		t.Error("probeKafka accepted Redis")
	}
}

func TestRequireLiveServers(t *testing.T) {
	RequireRedis(t)
	RequirePostgres(t)
	RequireClickHouse(t)
	RequireDynamoDB(t)
}
