// Package chhttp is the one ClickHouse client of the host side: the lander
// (land/chlander), the usage log (usage/chusage) and the examples speak
// ClickHouse's HTTP interface through it, on releases from 18.16 to
// current, with one rule for putting a string into SQL text (Quote) and
// one for reading an error answer (ServerError).
//
// A statement goes in the request body, or in the URL when the body
// carries an INSERT's rows. Settings are URL parameters. Credentials go in
// the X-ClickHouse-User and X-ClickHouse-Key headers, never in a URL, so
// they never reach a log line or an error.
//
// ClickHouse 18.16 has no query parameters: every value that reaches SQL
// text, in a WHERE clause or in the rows of an INSERT ... FORMAT Values,
// goes through Quote.
package chhttp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxErrorText bounds how much of an error body is kept.
const maxErrorText = 4096

// DefaultMaxResponse bounds a reply held in memory unless Options say
// otherwise.
const DefaultMaxResponse = 512 << 20

// Options configure a Client.
type Options struct {
	// URL is the HTTP interface, e.g. "http://127.0.0.1:8123" (required).
	// Credentials belong in User and Password, not in the URL.
	URL string
	// User and Password, when set, authenticate.
	User, Password string
	// Database, when set, is the default database of every statement.
	Database string
	// HTTPClient (default: a client of its own, without a timeout: bound
	// each call with its context; it keeps an idle connection 2 s, under
	// ClickHouse's keep_alive_timeout).
	HTTPClient *http.Client
	// MaxResponse bounds a reply body held in memory (default
	// DefaultMaxResponse; negative: no bound).
	MaxResponse int64
}

// Client speaks ClickHouse's HTTP interface. It is safe for concurrent use.
type Client struct {
	base     url.URL
	http     *http.Client
	user     string
	password string
	db       string
	max      int64
}

// New validates opts. It refuses a URL that carries credentials: a URL is
// logged, put in errors and shown in process lists.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("clickhouse: URL %q is not http(s)://host:port", Redact(opts.URL))
	}
	if u.User != nil {
		return nil, fmt.Errorf("clickhouse: URL %s carries credentials; pass User and Password instead", Redact(opts.URL))
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/"
	c := &Client{base: *u, http: opts.HTTPClient, user: opts.User, password: opts.Password, db: opts.Database, max: opts.MaxResponse}
	if c.http == nil {
		c.http = &http.Client{Transport: NewTransport()}
	}
	if c.max == 0 {
		c.max = DefaultMaxResponse
	}
	return c, nil
}

// idleConnTimeout is how long an idle connection is kept for the next
// request: under ClickHouse's keep_alive_timeout (3 s by default), so
// that a request never goes out on a connection the server is closing at
// that moment (a POST then fails with a broken pipe, and is not retried:
// part of it was written).
const idleConnTimeout = 2 * time.Second

// NewTransport is the transport of the default client, for a host that
// makes a client of its own: Go's default, but for how long an idle
// connection is kept (idleConnTimeout).
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.IdleConnTimeout = idleConnTimeout
	return t
}

// Redact returns s with the password of a URL replaced, for messages.
func Redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = url.User("xxx")
		return u.String()
	}
	return s
}

// URL is the base URL (it holds no credentials).
func (c *Client) URL() string { return c.base.String() }

// Exec runs one statement, sent as the request body, and returns the
// reply body.
func (c *Client) Exec(ctx context.Context, stmt string, settings url.Values) ([]byte, error) {
	return c.do(ctx, stmt, nil, settings)
}

// Insert runs stmt (an INSERT ... FORMAT F, in the URL) with data, the
// rows in format F, as the body.
func (c *Client) Insert(ctx context.Context, stmt string, data []byte, settings url.Values) error {
	if data == nil {
		data = []byte{}
	}
	_, err := c.do(ctx, stmt, data, settings)
	return err
}

func (c *Client) do(ctx context.Context, stmt string, data []byte, settings url.Values) ([]byte, error) {
	return c.request(ctx, stmt, data, settings, nil)
}

// Table is data sent with a query as a temporary table the query reads
// by Name (ClickHouse's "external data"), so that a long list of values is
// parsed as data instead of as SQL text.
type Table struct {
	Name string
	// Structure is the column list, e.g. "query String, group_key String".
	Structure string
	// Values holds the rows in FORMAT Values: "(...),(...)", each string
	// through AppendQuote.
	Values []byte
}

// request sends one statement: with ext, as a multipart form holding the
// table, the statement in the URL; with data, the statement in the URL and
// data as the body; otherwise the statement as the body.
func (c *Client) request(ctx context.Context, stmt string, data []byte, settings url.Values, ext *Table) ([]byte, error) {
	u := c.base
	p := url.Values{}
	if c.db != "" {
		p.Set("database", c.db)
	}
	for k, vs := range settings {
		for _, v := range vs {
			p.Set(k, v)
		}
	}
	var rd io.Reader
	contentType := ""
	switch {
	case ext != nil:
		p.Set("query", stmt)
		p.Set(ext.Name+"_structure", ext.Structure)
		p.Set(ext.Name+"_format", "Values")
		body, ct, err := multipartTable(ext)
		if err != nil {
			return nil, err
		}
		rd, contentType = bytes.NewReader(body), ct
	case data != nil:
		p.Set("query", stmt)
		rd = bytes.NewReader(data)
	default:
		rd = strings.NewReader(stmt)
	}
	u.RawQuery = p.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.user != "" {
		req.Header.Set("X-ClickHouse-User", c.user)
	}
	if c.password != "" {
		req.Header.Set("X-ClickHouse-Key", c.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transport(err)
	}
	defer resp.Body.Close()
	body := io.Reader(resp.Body)
	if c.max > 0 {
		body = io.LimitReader(resp.Body, c.max+1)
	}
	out, err := io.ReadAll(body)
	if err != nil {
		return nil, c.transport(err)
	}
	if resp.StatusCode != http.StatusOK {
		text := strings.TrimSpace(string(out))
		if len(text) > maxErrorText {
			text = text[:maxErrorText] + "…"
		}
		return nil, &ServerError{Status: resp.StatusCode, Text: text}
	}
	if c.max > 0 && int64(len(out)) > c.max {
		return nil, fmt.Errorf("clickhouse: %s: reply larger than %d bytes", c.base.Host, c.max)
	}
	return out, nil
}

// multipartTable encodes t as the one part of a multipart/form-data body
// and returns the body and its content type. The body ends with the close
// delimiter, without the line break that usually follows it (RFC 2046
// makes it optional): ClickHouse 18.16 stops reading a form at the
// delimiter, so a break that was not in its buffer by then (its reads are
// about 4 KiB: one request in about 4000 ends that way) stayed on the
// connection, and the server took it for the next request's empty header
// block, answered 400 with no body and closed: the client's next request
// on that kept-alive connection got that answer.
func multipartTable(t *Table) ([]byte, string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile(t.Name, t.Name)
	if err == nil {
		_, err = fw.Write(t.Values)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return nil, "", fmt.Errorf("clickhouse: encoding table %s: %w", t.Name, err)
	}
	body := buf.Bytes()
	if !bytes.HasSuffix(body, []byte("--"+mw.Boundary()+"--\r\n")) {
		return nil, "", fmt.Errorf("clickhouse: encoding table %s: the form does not end with its close delimiter", t.Name)
	}
	return body[:len(body)-2], mw.FormDataContentType(), nil
}

// transport drops the request URL (which holds the statement) from a
// transport error and names the server instead.
func (c *Client) transport(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("clickhouse: %s %s: %w", ue.Op, c.base.Host, ue.Err)
	}
	return fmt.Errorf("clickhouse: %s: %w", c.base.Host, err)
}

// SelectJSON runs query with FORMAT JSONEachRow and calls each with a
// decoder (numbers as json.Number) over every row. wait_end_of_query makes
// the server buffer the answer, so an error after the first rows arrives
// as an error status instead of text appended to a 200 body; 64-bit
// integers come as JSON numbers. settings may add or override settings.
//
// JSON decoding replaces invalid UTF-8 with U+FFFD: select hex(column) for
// a column that may hold arbitrary bytes.
func (c *Client) SelectJSON(ctx context.Context, query string, settings url.Values, each func(dec *json.Decoder) error) error {
	return c.selectJSON(ctx, query, settings, nil, each)
}

// SelectJSONWith is SelectJSON with t sent as a temporary table the query
// can read (SELECT ... WHERE x IN (SELECT x FROM t.Name)).
func (c *Client) SelectJSONWith(ctx context.Context, query string, settings url.Values, t Table, each func(dec *json.Decoder) error) error {
	return c.selectJSON(ctx, query, settings, &t, each)
}

func (c *Client) selectJSON(ctx context.Context, query string, settings url.Values, ext *Table, each func(dec *json.Decoder) error) error {
	s := url.Values{
		"output_format_json_quote_64bit_integers": {"0"},
		"wait_end_of_query":                       {"1"},
	}
	for k, v := range settings {
		s[k] = v
	}
	data, err := c.request(ctx, query+" FORMAT JSONEachRow", nil, s, ext)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), len(data)+1)
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
			return fmt.Errorf("%w: decoding %q: %w", ErrReply, truncate(line, 200), err)
		}
	}
	return sc.Err()
}

// SelectTSV runs query with FORMAT TabSeparated, with t (when not nil) as
// a temporary table, and calls each with the fields of every row. The
// fields are the server's text, unescaped only in that it is split at
// tabs: use it for numeric columns, where the text is the number, and
// SelectJSON for strings. It costs a fraction of a JSON decode a row.
func (c *Client) SelectTSV(ctx context.Context, query string, settings url.Values, t *Table, each func(fields [][]byte) error) error {
	s := url.Values{"wait_end_of_query": {"1"}}
	for k, v := range settings {
		s[k] = v
	}
	data, err := c.request(ctx, query+" FORMAT TabSeparated", nil, s, t)
	if err != nil {
		return err
	}
	var fields [][]byte
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if bytes.HasPrefix(line, []byte("Code: ")) {
			return &ServerError{Status: http.StatusOK, Text: string(line)}
		}
		fields = fields[:0]
		for {
			i := bytes.IndexByte(line, '\t')
			if i < 0 {
				fields = append(fields, line)
				break
			}
			fields = append(fields, line[:i])
			line = line[i+1:]
		}
		if err := each(fields); err != nil {
			return fmt.Errorf("%w: %w", ErrReply, err)
		}
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
