package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ubiksql/ubik/usage"
	"github.com/ubiksql/ubik/usage/chusage"
	"github.com/ubiksql/ubik/usage/pgusage"
)

const usageHelp = `usage: ubik usage <write|aggregate|list|get> --store URL [flags]

  --store postgres://user@host:5432/db?sslmode=disable
  --store clickhouse://[user[:password]@]host:8123[/database][?secure=true]
  --table NAME            table name (default usage_events)

  write      read JSON lines events from stdin (or --input FILE), one per line:
             {"key":"k1","time":"2026-07-18T10:00:00.123Z","meter":"api_calls","quantity":3,"dims":{"region":"eu"}}
             time is timestamp text as ubik run reads it (2026-07-18 10:00:00.123 in UTC,
             or RFC 3339 with Z or an offset) or epoch milliseconds. Prints {"inserted","duplicates","rejected","errors"};
             a bad line is reported with its line number and never blocks the good ones (exit status 1).
             --batch N   events per Write (default 1000)
  aggregate  --meter M --from T --to T [--filter D=JSON]... [--absent D]... [--group-by D]... [--window 1h]
             sums and counts over [from, to); prints the totals as JSON.
  list       [--meter M] [--from T] [--to T] [--filter D=JSON]... [--absent D]... [--cursor C] [--limit N]
             prints one page {"events":[...],"next":"..."}; pass next back as --cursor.
  get        --key K
             prints the stored event, or exits 1 if there is none.

  A filter value is a JSON scalar, so it is typed: --filter tier=5 matches the number 5,
  --filter 'tier="5"' the string "5", --filter tier=null an explicit null; --absent tier
  matches events without the dimension.`

const usageExamples = `

examples:
  ubik usage write --store 'postgres://ubik@127.0.0.1:5432/ubik?sslmode=disable' --input events.jsonl
  ubik usage aggregate --store clickhouse://127.0.0.1:8123/default --meter api_calls --from 2026-07-18T00:00:00Z --to 2026-07-19T00:00:00Z --window 1h
  ubik usage get --store 'postgres://ubik@127.0.0.1:5432/ubik?sslmode=disable' --key k1`

// runUsage dispatches `ubik usage <subcommand>`.
func runUsage(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, usageHelp)
		return fmt.Errorf("%w: usage needs a subcommand", ErrUsage)
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(env.Stdout, usageHelp+usageExamples)
		return errHelp
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "write", "aggregate", "list", "get":
	default:
		return fmt.Errorf("%w: unknown usage subcommand %q%s (write, aggregate, list, get)", ErrUsage, sub, suggest(sub, []string{"write", "aggregate", "list", "get"}))
	}
	fs := flag.NewFlagSet("ubik usage "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() { fmt.Fprintln(env.Stdout, usageHelp+usageExamples) }
	store := fs.String("store", "", "store URL (postgres:// or clickhouse://)")
	table := fs.String("table", "usage_events", "table name")
	input := fs.String("input", "", "write: read events from this file instead of stdin")
	batch := fs.Int("batch", 1000, "write: events per Write call")
	meter := fs.String("meter", "", "meter name")
	from := fs.String("from", "", "start of [from, to): timestamp text or epoch ms")
	to := fs.String("to", "", "end of [from, to): timestamp text or epoch ms")
	window := fs.Duration("window", 0, "aggregate: tumbling window size (e.g. 1h)")
	cursor := fs.String("cursor", "", "list: cursor from the previous page's next")
	limit := fs.Int("limit", usage.DefaultPageSize, "list: page size")
	key := fs.String("key", "", "get: the deduplication key")
	var filters []usage.Filter
	fs.Func("filter", "typed equality D=JSON (repeatable)", func(s string) error {
		name, raw, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return fmt.Errorf("want DIM=JSON, e.g. region=\"eu\" or tier=5")
		}
		var v usage.Value
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return fmt.Errorf("value of %s must be a JSON string, number, boolean or null (quote strings: %s='\"%s\"'): %v", name, name, raw, err)
		}
		filters = append(filters, usage.Eq(name, v))
		return nil
	})
	fs.Func("absent", "dimension must be missing (repeatable)", func(s string) error {
		filters = append(filters, usage.Absent(s))
		return nil
	})
	var groupBy []string
	fs.Func("group-by", "aggregate: dimension to group by (repeatable)", func(s string) error {
		groupBy = append(groupBy, s)
		return nil
	})
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if *store == "" {
		return fmt.Errorf("%w: --store is required", ErrUsage)
	}
	fromT, err := parseTimeFlag("from", *from)
	if err != nil {
		return err
	}
	toT, err := parseTimeFlag("to", *to)
	if err != nil {
		return err
	}
	l, err := openUsageStore(ctx, *store, *table)
	if err != nil {
		return err
	}
	defer l.Close()
	out := json.NewEncoder(env.Stdout)
	switch sub {
	case "write":
		if *batch < 1 || *batch > 100_000 {
			return fmt.Errorf("%w: --batch %d is outside [1, 100000]", ErrUsage, *batch)
		}
		in := env.Stdin
		if *input != "" {
			f, err := os.Open(*input)
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		return usageWrite(ctx, l, in, *batch, out)
	case "aggregate":
		tot, err := l.Aggregate(ctx, usage.AggregateQuery{Meter: *meter, From: fromT, To: toT, Filters: filters, GroupBy: groupBy, Window: *window})
		if err != nil {
			return err
		}
		return out.Encode(totalsJSON(tot, *window != 0))
	case "list":
		p, err := l.ListEvents(ctx, usage.ListQuery{Meter: *meter, From: fromT, To: toT, Filters: filters, Cursor: *cursor, Limit: *limit})
		if err != nil {
			return err
		}
		return out.Encode(p)
	default: // get
		if *key == "" {
			return fmt.Errorf("%w: --key is required", ErrUsage)
		}
		s, ok, err := l.Get(ctx, *key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("usage: no event with key %q", *key)
		}
		return out.Encode(s)
	}
}

func parseTimeFlag(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := usage.ParseBoundText(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: --%s %q is neither a timestamp (YYYY-MM-DD HH:MM:SS[.fff] or RFC 3339) nor epoch milliseconds", ErrUsage, name, s)
	}
	return t, nil
}

// openUsageStore picks the backend from the URL scheme. Credentials in the
// URL are passed to the driver and never printed.
func openUsageStore(ctx context.Context, store, table string) (usage.Log, error) {
	u, err := url.Parse(store)
	if err != nil {
		return nil, fmt.Errorf("%w: --store does not parse as a URL", ErrUsage)
	}
	switch u.Scheme {
	case "postgres", "postgresql":
		if _, err := storeQuery("--store", store, u, pgURLOptions()...); err != nil {
			return nil, err
		}
		return pgusage.Open(ctx, pgusage.Options{DSN: store, Table: table})
	case "clickhouse":
		q, err := storeQuery("--store", store, u, "secure")
		if err != nil {
			return nil, err
		}
		o := chusage.Options{Table: table, Database: strings.Trim(u.Path, "/")}
		if u.User != nil {
			o.User = u.User.Username()
			o.Password, _ = u.User.Password()
		}
		scheme := "http"
		if q.Get("secure") == "true" {
			scheme = "https"
		}
		o.URL = scheme + "://" + u.Host
		return chusage.Open(ctx, o)
	}
	return nil, fmt.Errorf("%w: --store must start with postgres:// or clickhouse://, not %q", ErrUsage, u.Scheme+"://")
}

type lineError struct {
	Line  int    `json:"line"`
	Key   string `json:"key,omitempty"`
	Error string `json:"error"`
}

type writeSummary struct {
	Inserted     int         `json:"inserted"`
	Duplicates   int         `json:"duplicates"`
	Rejected     int         `json:"rejected"`
	Errors       []lineError `json:"errors,omitempty"`
	ErrorsElided int         `json:"errors_elided,omitempty"`
}

// maxReportedErrors bounds the error list printed by write.
const maxReportedErrors = 100

// maxUsageLineBytes bounds one usage-event input line.
const maxUsageLineBytes = 1 << 20

func usageWrite(ctx context.Context, l usage.Log, in io.Reader, batchSize int, out *json.Encoder) error {
	var sum writeSummary
	report := func(e lineError) {
		sum.Rejected++
		if len(sum.Errors) < maxReportedErrors {
			sum.Errors = append(sum.Errors, e)
		} else {
			sum.ErrorsElided++
		}
	}
	var batch []usage.Event
	var lines []int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		r, err := l.Write(ctx, batch)
		sum.Inserted += r.Inserted
		sum.Duplicates += r.Duplicates
		var be *usage.BatchError
		if errors.As(err, &be) {
			for _, ee := range be.Errors {
				report(lineError{Line: lines[ee.Index], Key: ee.Key, Error: ee.Err.Error()})
			}
		} else if err != nil {
			return err
		}
		batch, lines = batch[:0], lines[:0]
		return nil
	}
	r := bufio.NewReaderSize(in, 64<<10)
	n := 0
	for {
		raw, long, err := readUsageLine(r, maxUsageLineBytes)
		if err == io.EOF {
			break
		}
		n++
		if err != nil {
			return fmt.Errorf("reading events at line %d: %w", n, err)
		}
		if long > 0 {
			report(lineError{Line: n, Error: fmt.Sprintf("line is %d bytes, at most %d", long, maxUsageLineBytes)})
			continue
		}
		line := bytes.TrimSpace(raw)
		if len(line) == 0 {
			continue
		}
		ev, err := usage.ParseEventJSON(line)
		if err != nil {
			report(lineError{Line: n, Error: err.Error()})
			continue
		}
		batch = append(batch, ev)
		lines = append(lines, n)
		if len(batch) >= batchSize {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := out.Encode(sum); err != nil {
		return err
	}
	if sum.Rejected > 0 {
		return fmt.Errorf("usage: %d event(s) rejected (see errors above); the others were written", sum.Rejected)
	}
	return nil
}

// readUsageLine returns the next line without its newline. A line longer
// than limit is read to its end and dropped: it comes back as long, its
// length, so the caller reports it and goes on. io.EOF means no more lines.
func readUsageLine(r *bufio.Reader, limit int) (line []byte, long int, err error) {
	var buf []byte
	n := 0 // bytes of the line so far, newline included
	for {
		frag, err := r.ReadSlice('\n')
		n += len(frag)
		if n <= limit+1 {
			buf = append(buf, frag...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			return nil, 0, err
		}
		if err == io.EOF && n == 0 {
			return nil, 0, io.EOF
		}
		if err == nil {
			n-- // the newline
		}
		if n > limit {
			return nil, n, nil
		}
		return buf[:n], 0, nil
	}
}

type groupJSON struct {
	WindowStart string             `json:"window_start,omitempty"`
	Dims        []usage.GroupValue `json:"dims,omitempty"`
	Sum         usage.Decimal      `json:"sum"`
	Count       int64              `json:"count"`
}

func totalsJSON(t usage.Totals, windowed bool) any {
	out := struct {
		Sum    usage.Decimal `json:"sum"`
		Count  int64         `json:"count"`
		Groups []groupJSON   `json:"groups,omitempty"`
	}{Sum: t.Sum, Count: t.Count}
	for _, g := range t.Groups {
		gj := groupJSON{Dims: g.Dims, Sum: g.Sum, Count: g.Count}
		if windowed {
			gj.WindowStart = usage.FormatTime(g.WindowStart)
		}
		out.Groups = append(out.Groups, gj)
	}
	return out
}
