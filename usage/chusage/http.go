package chusage

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
)

// externalGroupByBytes is where a GROUP BY starts spilling to disk.
const externalGroupByBytes = 1 << 30

// selectRows runs a SELECT through the shared client (JSONEachRow, the
// answer buffered so that a late error is an error status) with the
// settings the log's reads need.
func (l *Log) selectRows(ctx context.Context, query string, each func(dec *json.Decoder) error) error {
	return l.c.SelectJSON(ctx, query, url.Values{
		// Key lists and candidate sets can make a long statement.
		"max_query_size": {strconv.Itoa(len(query) + 4096)},
		// The collapse groups by key over the whole log; past this much
		// memory the server spills the GROUP BY to disk instead of failing
		// on its per-query memory limit.
		"max_bytes_before_external_group_by": {strconv.Itoa(externalGroupByBytes)},
	}, each)
}

// quoteInt renders an integer literal.
func quoteInt(n int64) string { return strconv.FormatInt(n, 10) }
