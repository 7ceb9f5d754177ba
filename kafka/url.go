package kafka

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ubiksql/ubik/internal/drive"
)

// Role says which side of a query an endpoint is on; it decides which
// options are allowed.
type Role uint8

// Roles.
const (
	RoleSource Role = iota + 1
	RoleSink
)

func (r Role) String() string {
	if r == RoleSink {
		return "sink"
	}
	return "source"
}

// Endpoint is a topic on a cluster plus its role's options.
type Endpoint struct {
	Config Config
	Topic  string
	// Source options.
	Format           drive.MessageFormat // how each record value encodes an event; default JSON
	From             StartOffset         // default FromEarliest
	PartitionedByKey bool                // the topic is already partitioned by the GROUP BY key
	IdleTimeout      time.Duration       // 0: DefaultIdleTimeout
	// Sink options.
	AllowUncompacted bool // warn instead of refusing an uncompacted sink topic
	Partitions       int  // partitions of a sink topic ubik creates; 0: as many as the source
}

// StartOffset is where a source starts when its consumer group has no
// committed offset for a partition. Committed offsets always win: ignoring
// them would replay or skip input and break exactly-once.
type StartOffset uint8

// Start offsets.
const (
	FromEarliest  StartOffset = iota // no commit: the start of the partition
	FromLatest                       // no commit: the end of the partition
	FromCommitted                    // no commit: an error (auto.offset.reset=none)
)

// ParseStartOffset parses earliest, latest or committed.
func ParseStartOffset(s string) (StartOffset, error) {
	switch strings.ToLower(s) {
	case "", "earliest":
		return FromEarliest, nil
	case "latest":
		return FromLatest, nil
	case "committed":
		return FromCommitted, nil
	}
	return 0, fmt.Errorf("%w: start offset %q is not earliest, latest or committed", ErrConfig, s)
}

func (s StartOffset) String() string {
	switch s {
	case FromLatest:
		return "latest"
	case FromCommitted:
		return "committed"
	}
	return "earliest"
}

var commonKeys = []string{"tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "sasl_mechanism", "sasl_user", "sasl_password_env"}
var sourceKeys = []string{"format", "delimiter", "header", "from", "partitioned_by_key", "idle_timeout"}
var sinkKeys = []string{"allow_uncompacted", "partitions"}

// engineSourceKeys are the source options the planner reads, not the
// endpoint (input deduplication): a CREATE SOURCE's WITH takes them, and
// FromOptions leaves them to the planner; a URL, which the planner never
// sees, may not carry them.
var engineSourceKeys = []string{"dedup_key", "dedup_within"}

// ParseURL parses kafka://host:port[,host:port]/topic?option=value&...
// The options are the same as the WITH options of a Kafka source or sink
// (see FromOptions), except brokers and topic, which the URL carries.
// getenv reads the SASL password variable; nil means no environment.
func ParseURL(raw string, role Role, getenv func(string) string) (Endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Endpoint{}, fmt.Errorf("%w: %s URL: %v", ErrConfig, role, redactURLError(err))
	}
	if u.Scheme != "kafka" {
		return Endpoint{}, fmt.Errorf("%w: %s URL scheme is %q, want kafka://host:port/topic", ErrConfig, role, u.Scheme)
	}
	if u.User != nil {
		return Endpoint{}, fmt.Errorf("%w: %s URL carries user info; use sasl_user=... and put the password in $%s", ErrConfig, role, DefaultPasswordEnv)
	}
	opts := map[string]string{"brokers": u.Host, "topic": strings.TrimPrefix(u.Path, "/")}
	for k, vs := range u.Query() {
		lk := strings.ToLower(k)
		if lk == "brokers" || lk == "topic" {
			return Endpoint{}, fmt.Errorf("%w: %s URL option %q: the URL itself names it", ErrConfig, role, k)
		}
		if slices.Contains(engineSourceKeys, lk) {
			return Endpoint{}, fmt.Errorf("%w: %s URL option %q is the query's, not the topic's: declare it in the source's CREATE SOURCE ... WITH (%s = '...')", ErrConfig, role, k, lk)
		}
		if len(vs) != 1 {
			return Endpoint{}, fmt.Errorf("%w: %s URL option %q given %d times", ErrConfig, role, k, len(vs))
		}
		opts[lk] = vs[0]
	}
	return FromOptions(opts, role, getenv)
}

// redactURLError drops the URL from a url.Parse error, which may echo a
// password.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// FromOptions builds an endpoint from WITH options (keys lowercased):
//
//	brokers            host:port[,host:port...] (required)
//	topic              the topic (required)
//	tls                true|false (default false; implied by tls_ca/tls_cert)
//	tls_ca, tls_cert, tls_key, tls_server_name   PEM files and SNI name
//	sasl_mechanism     PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
//	sasl_user          the SASL user
//	sasl_password_env  the environment variable holding the password
//	                   (default UBIK_KAFKA_PASSWORD)
//
// Source only: format (json, the default: one JSON object per record
// value; or csv: one CSV record per value, fields in the declared column
// order), delimiter (csv: one character, default ","; "tab" and "space"
// name those), header (csv: true skips a record that is the header row,
// false, the default, counts it as malformed; see drive.MessageFormat),
// from (earliest | latest | committed), partitioned_by_key (true|false),
// idle_timeout (a Go duration such as 30s). Sink only: allow_uncompacted
// (true|false), partitions (a positive integer). A password option is
// refused.
func FromOptions(opts map[string]string, role Role, getenv func(string) string) (Endpoint, error) {
	allowed := map[string]bool{"brokers": true, "topic": true, "connector": true, "path": true}
	for _, k := range commonKeys {
		allowed[k] = true
	}
	roleKeys := sourceKeys
	if role == RoleSink {
		roleKeys = sinkKeys
	}
	if role == RoleSource {
		roleKeys = append(slices.Clone(roleKeys), engineSourceKeys...)
	}
	for _, k := range roleKeys {
		allowed[k] = true
	}
	for k := range opts {
		if strings.Contains(k, "password") && k != "sasl_password_env" {
			return Endpoint{}, fmt.Errorf("%w: %s option %q: a password is never taken from a URL or a WITH option; put it in $%s (or name another variable with sasl_password_env)", ErrConfig, role, k, DefaultPasswordEnv)
		}
		if !allowed[k] {
			names := make([]string, 0, len(allowed))
			for n := range allowed {
				names = append(names, n)
			}
			sort.Strings(names)
			return Endpoint{}, fmt.Errorf("%w: unknown %s option %q (known: %s)", ErrConfig, role, k, strings.Join(names, ", "))
		}
	}
	var e Endpoint
	for _, b := range strings.Split(opts["brokers"], ",") {
		if b = strings.TrimSpace(b); b != "" {
			e.Config.Brokers = append(e.Config.Brokers, b)
		}
	}
	e.Topic = opts["topic"]
	if e.Topic == "" {
		return e, fmt.Errorf("%w: %s has no topic", ErrConfig, role)
	}
	if err := checkTopicName(e.Topic); err != nil {
		return e, err
	}
	useTLS, err := boolOpt(opts, "tls", role)
	if err != nil {
		return e, err
	}
	if useTLS || opts["tls_ca"] != "" || opts["tls_cert"] != "" || opts["tls_key"] != "" || opts["tls_server_name"] != "" {
		e.Config.TLS = &TLSConfig{CAFile: opts["tls_ca"], CertFile: opts["tls_cert"], KeyFile: opts["tls_key"], ServerName: opts["tls_server_name"]}
	}
	e.Config.SASL.Mechanism = strings.ToUpper(opts["sasl_mechanism"])
	e.Config.SASL.User = opts["sasl_user"]
	if e.Config.SASL.Mechanism != "" {
		env := opts["sasl_password_env"]
		if env == "" {
			env = DefaultPasswordEnv
		}
		if getenv != nil {
			e.Config.SASL.Password = getenv(env)
		}
	}
	if err := e.Config.Validate(); err != nil {
		return e, fmt.Errorf("%s: %w", role, err)
	}
	if role == RoleSource {
		if e.Format, err = drive.ParseMessageFormat(opts); err != nil {
			return e, fmt.Errorf("%w: source: %v", ErrConfig, err)
		}
		if e.From, err = ParseStartOffset(opts["from"]); err != nil {
			return e, err
		}
		if e.PartitionedByKey, err = boolOpt(opts, "partitioned_by_key", role); err != nil {
			return e, err
		}
		if s := opts["idle_timeout"]; s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return e, fmt.Errorf("%w: source idle_timeout %q is not a positive duration (e.g. 30s)", ErrConfig, s)
			}
			e.IdleTimeout = d
		}
	} else {
		if e.AllowUncompacted, err = boolOpt(opts, "allow_uncompacted", role); err != nil {
			return e, err
		}
		if s := opts["partitions"]; s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 1<<20 {
				return e, fmt.Errorf("%w: sink partitions %q is not a positive integer", ErrConfig, s)
			}
			e.Partitions = n
		}
	}
	return e, nil
}

func boolOpt(opts map[string]string, k string, role Role) (bool, error) {
	switch strings.ToLower(opts[k]) {
	case "", "false", "0", "no":
		return false, nil
	case "true", "1", "yes":
		return true, nil
	}
	return false, fmt.Errorf("%w: %s option %s=%q is not true or false", ErrConfig, role, k, opts[k])
}

// checkTopicName applies Kafka's rule: 1 to 249 characters of [a-zA-Z0-9._-].
func checkTopicName(t string) error {
	if len(t) > 249 || t == "." || t == ".." {
		return fmt.Errorf("%w: topic name %q is not valid", ErrConfig, t)
	}
	for _, c := range []byte(t) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q has %q; Kafka allows [a-zA-Z0-9._-]", ErrConfig, t, c)
		}
	}
	return nil
}
