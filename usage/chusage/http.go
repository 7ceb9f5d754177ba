package chusage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ServerError is an error answer from ClickHouse, with its HTTP status and
// the server's own error text.
type ServerError struct {
	Status int
	Text   string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("clickhouse: HTTP %d: %s", e.Status, e.Text)
}

// Code returns ClickHouse's numeric error code ("Code: 60, ...") or 0.
func (e *ServerError) Code() int {
	rest, ok := strings.CutPrefix(e.Text, "Code: ")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
	return n
}

// maxErrorText bounds how much of an error body is kept.
const maxErrorText = 4096

// externalGroupByBytes is where a GROUP BY starts spilling to disk.
const externalGroupByBytes = 1 << 30

// maxResponseBytes bounds a response body held in memory (pages and
// aggregates are bounded well below it).
const maxResponseBytes = 512 << 20

// client speaks ClickHouse's HTTP interface: one statement per request,
// settings as URL parameters, the status checked on every answer.
type client struct {
	base     *url.URL
	http     *http.Client
	user     string
	password string
}

// exec runs one statement. query goes in the URL when body is non-nil (an
// INSERT whose rows stream in the body), otherwise in the body.
func (c *client) do(ctx context.Context, query string, body []byte, settings url.Values) ([]byte, error) {
	u := *c.base
	p := u.Query()
	for k, vs := range settings {
		for _, v := range vs {
			p.Set(k, v)
		}
	}
	var rd io.Reader
	if body != nil {
		p.Set("query", query)
		rd = bytes.NewReader(body)
	} else {
		rd = strings.NewReader(query)
	}
	u.RawQuery = p.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if c.user != "" {
		req.Header.Set("X-ClickHouse-User", c.user)
	}
	if c.password != "" {
		req.Header.Set("X-ClickHouse-Key", c.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, redactURL(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, redactURL(err)
	}
	if resp.StatusCode != http.StatusOK {
		text := strings.TrimSpace(string(data))
		if len(text) > maxErrorText {
			text = text[:maxErrorText] + "…"
		}
		return nil, &ServerError{Status: resp.StatusCode, Text: text}
	}
	if len(data) > maxResponseBytes {
		return nil, fmt.Errorf("clickhouse: response larger than %d bytes", maxResponseBytes)
	}
	return data, nil
}

// redactURL drops the request URL (which holds the query text) from
// transport errors; the error itself is enough to act on.
func redactURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("clickhouse: %s: %w", ue.Op, ue.Err)
	}
	return err
}

// selectRows runs a SELECT with FORMAT JSONEachRow and decodes each line.
// wait_end_of_query makes the server buffer the answer, so an error after
// the first rows arrives as an HTTP error status instead of text appended
// to a 200 body.
func (c *client) selectRows(ctx context.Context, query string, each func(dec *json.Decoder) error) error {
	settings := url.Values{
		"output_format_json_quote_64bit_integers": {"0"},
		"wait_end_of_query":                       {"1"},
		"max_query_size":                          {strconv.Itoa(len(query) + 4096)},
		// The collapse groups by key over the whole log; past this much
		// memory the server spills the GROUP BY to disk instead of failing
		// on its per-query memory limit.
		"max_bytes_before_external_group_by": {strconv.Itoa(externalGroupByBytes)},
	}
	data, err := c.do(ctx, query+" FORMAT JSONEachRow", nil, settings)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), maxResponseBytes)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if bytes.HasPrefix(line, []byte("Code: ")) {
			return &ServerError{Status: http.StatusOK, Text: string(line)}
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := each(dec); err != nil {
			return fmt.Errorf("clickhouse: decoding %q: %w", truncateBytes(line, 200), err)
		}
	}
	return sc.Err()
}

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
