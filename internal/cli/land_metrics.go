package cli

import (
	"net/url"
)

// storeKind is the store a --to URL names (redis, dynamodb, postgres,
// clickhouse), without anything else of the URL.
func storeKind(to string) string {
	u, err := url.Parse(to)
	if err != nil {
		return "unknown"
	}
	switch u.Scheme {
	case "redis", "rediss":
		return "redis"
	case "postgres", "postgresql":
		return "postgres"
	case "dynamodb", "clickhouse":
		return u.Scheme
	}
	return "unknown"
}
