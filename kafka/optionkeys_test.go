package kafka

import (
	"slices"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestOptionKeysAgreeWithPlan: the binder refuses a WITH option it does not
// know, so every option the Kafka endpoint reads must be one it knows.
func TestOptionKeysAgreeWithPlan(t *testing.T) {
	for _, c := range []struct {
		keys, known []string
	}{
		{append(append(append([]string{"brokers", "topic"}, commonKeys...), sourceKeys...), engineSourceKeys...), plan.SourceOptionKeys()},
		{append(append([]string{"brokers", "topic"}, commonKeys...), sinkKeys...), plan.SinkOptionKeys()},
	} {
		for _, k := range c.keys {
			if !slices.Contains(c.known, k) {
				t.Errorf("kafka reads option %q, which the binder refuses", k)
			}
		}
	}
}

// TestEngineSourceOptions: a Kafka source's WITH options may carry the
// planner's (input deduplication), which the endpoint leaves alone; a URL,
// which the planner never reads, may not.
func TestEngineSourceOptions(t *testing.T) {
	opts := map[string]string{"connector": "kafka", "brokers": "127.0.0.1:1", "topic": "ev", "dedup_key": "id", "dedup_within": "1 hour"}
	if _, err := FromOptions(opts, RoleSource, nil); err != nil {
		t.Errorf("WITH: %v", err)
	}
	if _, err := FromOptions(opts, RoleSink, nil); err == nil {
		t.Error("a sink took dedup_key")
	}
	_, err := ParseURL("kafka://127.0.0.1:1/ev?dedup_key=id", RoleSource, nil)
	if err == nil || !strings.Contains(err.Error(), "declare it in the source's CREATE SOURCE") {
		t.Errorf("URL: %v", err)
	}
}
