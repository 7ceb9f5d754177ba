package ubik_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/internal/types"
)

// joinScriptCmd runs the script commands of a temporal join's table input
// (see TestScripts); the scripts run with a join buffer of 4 events.
func joinScriptCmd(t *testing.T, q *ubik.Query, c *scriptCmd) []string {
	var out []string
	switch c.name {
	case "table":
		for _, l := range c.block {
			if err := q.PushTable([]byte(l)); err != nil {
				out = append(out, "! "+err.Error())
			}
		}
	case "table-watermark":
		us, err := types.ParseTimestamp([]byte(c.arg))
		if err != nil {
			t.Fatalf("line %d: %v", c.line, err)
		}
		if err := q.AdvanceTableWatermark(time.UnixMicro(us)); err != nil {
			out = append(out, "! "+err.Error())
		}
	case "end-table":
		if err := q.EndTable(); err != nil {
			out = append(out, "! "+err.Error())
		}
	case "join-stats":
		s := q.Stats()
		j := s.Join
		out = append(out, fmt.Sprintf("join: events=%d late_events=%d joined=%d unmatched=%d null_keys=%d buffered=%d versions=%d keys=%d dropped=%d",
			j.Events, j.LateEvents, j.Joined, j.Unmatched, j.NullKeys, j.Buffered, j.Versions, j.Keys, j.Dropped),
			fmt.Sprintf("table: rows=%d malformed=%d late=%d watermark=%s", s.Table.RowsIn, s.Table.Malformed, s.Table.Late, wmTS(j.TableWM)))
	}
	return out
}

func wmTS(us int64) string {
	if us < types.MinTimestamp || us > types.MaxTimestamp {
		return "-"
	}
	return ts(us)
}
