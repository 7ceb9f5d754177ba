package kafka

import (
	"slices"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestOptionKeysAgreeWithPlan: the binder refuses a WITH option it does not
// know, so every option the Kafka endpoint reads must be one it knows.
func TestOptionKeysAgreeWithPlan(t *testing.T) {
	for _, c := range []struct {
		keys, known []string
	}{
		{append(append([]string{"brokers", "topic"}, commonKeys...), sourceKeys...), plan.SourceOptionKeys()},
		{append(append([]string{"brokers", "topic"}, commonKeys...), sinkKeys...), plan.SinkOptionKeys()},
	} {
		for _, k := range c.keys {
			if !slices.Contains(c.known, k) {
				t.Errorf("kafka reads option %q, which the binder refuses", k)
			}
		}
	}
}
