package chhttp

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleConnectionNotReused: a connection idle for longer than
// ClickHouse closes one after (keep_alive_timeout, 3 s by default) is not
// used for the next request, which would race the server's close and
// could fail mid-write with a broken pipe: the default client keeps an
// idle connection idleConnTimeout, and the next request after a longer
// pause opens a new one. A request soon after the last reuses it.
func TestIdleConnectionNotReused(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("1\n"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := New(Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	query := func() {
		t.Helper()
		if _, err := c.Exec(context.Background(), "SELECT 1", nil); err != nil {
			t.Fatal(err)
		}
	}
	query()
	query()
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for two requests in a row, want 1 (kept alive)", n)
	}
	time.Sleep(idleConnTimeout + 500*time.Millisecond)
	query()
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections after a pause of %v, want 2: the idle one must not be reused", n, idleConnTimeout+500*time.Millisecond)
	}
}
