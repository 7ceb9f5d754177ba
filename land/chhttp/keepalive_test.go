package chhttp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
)

// countingConn counts the bytes written to a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// TestExternalDataKeepsConnection: a query with a table (a multipart
// body) leaves nothing of itself on its connection, whatever its size:
// the next request goes out on the same connection and is answered. The
// sizes swept hold those (4098, 8190, 12282 bytes) whose line break after
// the close delimiter ClickHouse 18.16 left unread, then took for a
// request of its own and answered 400 with no body, before closing.
func TestExternalDataKeepsConnection(t *testing.T) {
	var written atomic.Int64
	tr := NewTransport()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, &written}, nil
	}
	c, err := New(Options{URL: testenv.RequireClickHouse(t), HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// query sends a table of one string of pad bytes and returns the
	// size of the request.
	query := func(pad int) int {
		t.Helper()
		before := written.Load()
		table := &Table{Name: "_t", Structure: "s String", Values: fmt.Appendf(nil, "('%s')", strings.Repeat("x", pad))}
		got := -1
		err := c.SelectTSV(ctx, "SELECT length(s) FROM _t", nil, table, func(f [][]byte) error {
			n, err := strconv.Atoi(string(f[0]))
			got = n
			return err
		})
		if err != nil || got != pad {
			t.Fatalf("a table of a %d-byte string: length %d, %v", pad, got, err)
		}
		return int(written.Load() - before)
	}
	next := func(after int) {
		t.Helper()
		reused := false
		trace := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		out, err := c.Exec(trace, "SELECT 1", nil)
		if err != nil || string(out) != "1\n" || !reused {
			t.Errorf("the request after a %d-byte query with a table: %q, %v (on the same connection: %v)", after, out, err, reused)
		}
	}
	base := query(0)
	next(base)
	hit := map[int]bool{}
	for _, size := range []int{4098, 8190, 12282} {
		// Content-Length gains a digit past base: start a little early.
		for pad := size - base - 8; pad <= size-base+4; pad++ {
			n := query(pad)
			hit[n] = true
			next(n)
		}
		if !hit[size] {
			t.Fatalf("no query of %d bytes was sent (sizes %v)", size, hit)
		}
	}
}
