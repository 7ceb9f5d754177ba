// Package kafka is ubik's opt-in Kafka adapter, over franz-go: connection
// settings (brokers, TLS, SASL PLAIN and SCRAM), kafka:// URLs, the admin
// checks on the sink and internal topics, and the exactly-once pipeline that
// consumes a source topic, runs the query, and produces the changelog to a
// compacted sink topic, all inside Kafka transactions.
//
// The engine core never imports this package; the CLI (ubik run --source
// kafka://... --sink kafka://...) and embedding hosts do. DESIGN.md in this
// directory describes the processing model: the two stages, watermarks,
// state, recovery and scale-out.
package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanisms.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// DefaultPasswordEnv is the environment variable the SASL password is read
// from when the settings name none. A password is never accepted in a URL
// or a WITH option: those end up in shell history, process lists and logs.
const DefaultPasswordEnv = "UBIK_KAFKA_PASSWORD"

// Config is how to reach a cluster. The zero value is not valid: Brokers is
// required.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// TLS, when non-nil, encrypts every connection.
	TLS *TLSConfig
	// SASL authenticates every connection when Mechanism is set.
	SASL SASLConfig
}

// TLSConfig names PEM files. All fields are optional: an empty CAFile uses
// the system roots; CertFile and KeyFile (together) present a client
// certificate.
type TLSConfig struct {
	CAFile     string
	CertFile   string
	KeyFile    string
	ServerName string // default: the host of each broker address
}

// SASLConfig selects a SASL mechanism. Password is a secret: it is never
// printed by String, LogValue or any error of this package.
type SASLConfig struct {
	Mechanism string // "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	User      string
	Password  string
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("%w: no brokers", ErrConfig)
	}
	for _, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return fmt.Errorf("%w: broker %q is not host:port", ErrConfig, b)
		}
	}
	if c.TLS != nil && (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("%w: TLS client certificate needs both a cert file and a key file", ErrConfig)
	}
	switch c.SASL.Mechanism {
	case "":
		if c.SASL.User != "" {
			return fmt.Errorf("%w: a SASL user without a mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", ErrConfig)
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASL.User == "" {
			return fmt.Errorf("%w: SASL %s needs a user", ErrConfig, c.SASL.Mechanism)
		}
		if c.SASL.Password == "" {
			return fmt.Errorf("%w: SASL %s for user %q has an empty password (set $%s)", ErrConfig, c.SASL.Mechanism, c.SASL.User, DefaultPasswordEnv)
		}
	default:
		return fmt.Errorf("%w: unknown SASL mechanism %q (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", ErrConfig, c.SASL.Mechanism)
	}
	return nil
}

// String describes c with the password redacted.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString("brokers=")
	b.WriteString(strings.Join(c.Brokers, ","))
	if c.TLS != nil {
		b.WriteString(" tls=on")
		if c.TLS.CAFile != "" {
			b.WriteString(" ca=" + c.TLS.CAFile)
		}
		if c.TLS.CertFile != "" {
			b.WriteString(" cert=" + c.TLS.CertFile)
		}
	}
	if c.SASL.Mechanism != "" {
		b.WriteString(" sasl=" + c.SASL.Mechanism + " user=" + c.SASL.User)
		if c.SASL.Password != "" {
			b.WriteString(" password=REDACTED")
		}
	}
	return b.String()
}

// GoString keeps %#v from printing the password.
func (c Config) GoString() string { return "kafka.Config{" + c.String() + "}" }

// LogValue keeps slog from printing the password.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// String redacts the password.
func (s SASLConfig) String() string {
	if s.Mechanism == "" {
		return "none"
	}
	return s.Mechanism + " user=" + s.User + " password=REDACTED"
}

// GoString redacts the password.
func (s SASLConfig) GoString() string { return "kafka.SASLConfig{" + s.String() + "}" }

// LogValue redacts the password.
func (s SASLConfig) LogValue() slog.Value { return slog.StringValue(s.String()) }

// ClientOpts returns the franz-go options that connect as c describes.
func (c Config) ClientOpts() ([]kgo.Opt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.TLS != nil {
		tc, err := c.TLS.build()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := c.SASL.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (s SASLConfig) mechanism() sasl.Mechanism {
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
	}
	return nil
}

func (t *TLSConfig) build() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: TLS CA file: %v", ErrConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: TLS CA file %s holds no PEM certificate", ErrConfig, t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: TLS client certificate %s: %v", ErrConfig, t.CertFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
