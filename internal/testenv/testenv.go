// Package testenv gives tests the connection settings of the real servers
// they run against (Redis, PostgreSQL, ClickHouse, DynamoDB, Kafka), checks
// that a server answers before a test uses it, and makes unique names so
// that packages testing in parallel against one server never collide.
//
// Settings come from the environment (scripts/services.sh env prints them);
// unset variables take the defaults below. An unreachable server is a test
// failure, never a skip: a suite that silently skips its integration tests
// reports green while testing nothing.
//
// It uses the standard library only, so importing it adds no SDK to a test
// binary: PGScript talks to PostgreSQL through the psql binary, for the
// root module's oracle tests, whose module must not require a driver.
package testenv

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
)

// Environment variables and their defaults.
const (
	EnvRedisAddr        = "UBIK_REDIS_ADDR"
	EnvPGDSN            = "UBIK_PG_DSN"
	EnvClickHouseURL    = "UBIK_CLICKHOUSE_URL"
	EnvDynamoDBEndpoint = "UBIK_DYNAMODB_ENDPOINT"
	EnvKafkaBrokers     = "UBIK_KAFKA_BROKERS"

	DefaultRedisAddr        = "127.0.0.1:6379"
	DefaultPGDSN            = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultClickHouseURL    = "http://127.0.0.1:8123"
	DefaultDynamoDBEndpoint = "http://127.0.0.1:8000"
	DefaultKafkaBrokers     = "127.0.0.1:9092"
)

// probeTimeout bounds each reachability check.
const probeTimeout = 10 * time.Second

func get(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// RedisAddr is host:port of the Redis server.
func RedisAddr() string { return get(EnvRedisAddr, DefaultRedisAddr) }

// PGDSN is the PostgreSQL connection string.
func PGDSN() string { return get(EnvPGDSN, DefaultPGDSN) }

// ClickHouseURL is the base URL of ClickHouse's HTTP interface.
func ClickHouseURL() string {
	return strings.TrimRight(get(EnvClickHouseURL, DefaultClickHouseURL), "/")
}

// DynamoDBEndpoint is the base URL of the DynamoDB-compatible server.
func DynamoDBEndpoint() string {
	return strings.TrimRight(get(EnvDynamoDBEndpoint, DefaultDynamoDBEndpoint), "/")
}

// KafkaBrokers is the list of seed brokers (comma-separated in the variable).
func KafkaBrokers() []string {
	var out []string
	for _, b := range strings.Split(get(EnvKafkaBrokers, DefaultKafkaBrokers), ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

func unreachable(t testing.TB, service, where, env string, err error) {
	t.Helper()
	t.Fatalf("testenv: %s is not reachable at %s (set %s to change it; scripts/services.sh up starts it): %v",
		service, where, env, err)
}

// RequireRedis fails the test unless Redis answers PING, and returns its address.
func RequireRedis(t testing.TB) string {
	t.Helper()
	addr := RedisAddr()
	if err := probeRedis(addr, probeTimeout); err != nil {
		unreachable(t, "Redis", addr, EnvRedisAddr, err)
	}
	return addr
}

func probeRedis(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the reply to PING: %w", err)
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q, not +PONG", strings.TrimSpace(line))
	}
	return nil
}

// RequirePostgres fails the test unless a PostgreSQL server answers at the
// DSN's address, and returns the DSN.
func RequirePostgres(t testing.TB) string {
	t.Helper()
	dsn := PGDSN()
	addr, err := pgAddr(dsn)
	if err == nil {
		err = probePostgres(addr, probeTimeout)
	}
	if err != nil {
		// The DSN may hold a password: name only the address.
		unreachable(t, "PostgreSQL", addr, EnvPGDSN, err)
	}
	return dsn
}

func pgAddr(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s is not a postgres:// URL", EnvPGDSN)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "5432"
	}
	return net.JoinHostPort(host, port), nil
}

// probePostgres sends an SSLRequest; any PostgreSQL server answers 'S' or 'N'.
func probePostgres(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}); err != nil {
		return err
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return fmt.Errorf("reading the reply to SSLRequest: %w", err)
	}
	if b[0] != 'S' && b[0] != 'N' {
		return fmt.Errorf("SSLRequest answered %q, not a PostgreSQL server", b[0])
	}
	return nil
}

// RequireClickHouse fails the test unless ClickHouse answers /ping with
// "Ok.", and returns its base URL.
func RequireClickHouse(t testing.TB) string {
	t.Helper()
	u := ClickHouseURL()
	if err := probeHTTP(u+"/ping", "", func(code int, body string) error {
		if code != http.StatusOK || strings.TrimSpace(body) != "Ok." {
			return fmt.Errorf("/ping answered %d %q, not 200 \"Ok.\"", code, body)
		}
		return nil
	}); err != nil {
		unreachable(t, "ClickHouse", u, EnvClickHouseURL, err)
	}
	return u
}

// RequireDynamoDB fails the test unless a DynamoDB-compatible server answers,
// and returns its endpoint.
func RequireDynamoDB(t testing.TB) string {
	t.Helper()
	u := DynamoDBEndpoint()
	// An unsigned ListTables gets a DynamoDB-shaped error body ("__type"),
	// which tells a DynamoDB server from any other HTTP server.
	if err := probeHTTP(u+"/", "DynamoDB_20120810.ListTables", func(code int, body string) error {
		if !strings.Contains(body, "__type") && !strings.Contains(body, "TableNames") {
			return fmt.Errorf("ListTables answered %d %q, not a DynamoDB server", code, body)
		}
		return nil
	}); err != nil {
		unreachable(t, "DynamoDB", u, EnvDynamoDBEndpoint, err)
	}
	return u
}

func probeHTTP(u, amzTarget string, check func(int, string) error) error {
	cl := &http.Client{Timeout: probeTimeout}
	var resp *http.Response
	var err error
	if amzTarget == "" {
		resp, err = cl.Get(u)
	} else {
		req, rerr := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
		if rerr != nil {
			return rerr
		}
		req.Header.Set("X-Amz-Target", amzTarget)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err = cl.Do(req)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	return check(resp.StatusCode, string(body))
}

// RequireKafka fails the test unless the first seed broker answers a Kafka
// ApiVersions request, and returns the seed brokers.
func RequireKafka(t testing.TB) []string {
	t.Helper()
	brokers := KafkaBrokers()
	if len(brokers) == 0 {
		unreachable(t, "Kafka", "(none)", EnvKafkaBrokers, fmt.Errorf("no broker listed"))
	}
	if err := probeKafka(brokers[0], probeTimeout); err != nil {
		unreachable(t, "Kafka", brokers[0], EnvKafkaBrokers, err)
	}
	return brokers
}

func probeKafka(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	// ApiVersions v0: length 14, api key 18, version 0, correlation id 1,
	// client id "ubik".
	req := []byte{0, 0, 0, 14, 0, 18, 0, 0, 0, 0, 0, 1, 0, 4, 'u', 'b', 'i', 'k'}
	if _, err := c.Write(req); err != nil {
		return err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return fmt.Errorf("reading the reply to ApiVersions: %w", err)
	}
	if hdr[4] != 0 || hdr[5] != 0 || hdr[6] != 0 || hdr[7] != 1 {
		return fmt.Errorf("ApiVersions reply has correlation id %x, not a Kafka broker", hdr[4:])
	}
	return nil
}

// Name returns a name unique to this test run: prefix, the test's name and
// random hex, lower-cased, with every character outside [a-z0-9_] turned
// into '_', at most 48 bytes. It is a valid unquoted identifier in
// PostgreSQL and ClickHouse, a valid DynamoDB table name, and a safe Redis
// key prefix or Kafka topic name.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	const maxLen = 48
	suffix := "_" + RandomHex(6)
	var b strings.Builder
	full := t.Name()
	if prefix != "" {
		full = prefix + "_" + full
	}
	for _, r := range strings.ToLower(full) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > maxLen-len(suffix) {
		s = s[:maxLen-len(suffix)]
	}
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "t" + s
	}
	return s + suffix
}

// RandomHex returns 2n random hex digits.
func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("testenv: crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return hex.EncodeToString(b)
}

// GoWork returns the repository's go.work: the nearest one in the working
// directory or above it. A test that runs the go command on another module
// of the repository (the ubik binary from internal/cli's tests, the import
// rules over every module) passes it as GOWORK, so it works the same when
// the test itself runs with GOWORK=off.
func GoWork(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for {
		p := filepath.Join(dir, "go.work")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("testenv: no go.work in the working directory or above it: the repository's modules build together through it")
		}
		dir = parent
	}
}
