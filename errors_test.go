package ubik_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// TestPanicIsOneLineAndLogged: a panic in a host's callback comes back as
// a one-line ErrInternal (it ends up in error output and C error
// strings), and Options.Logger receives its stack.
func TestPanicIsOneLineAndLogged(t *testing.T) {
	var log bytes.Buffer
	opts := ubik.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
	e, err := ubik.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.Start(bpTumble, ubik.QueryOptions{OnRecord: func(changelog.Record) error { panic("host bug") }})
	if err != nil {
		t.Fatal(err)
	}
	err = q.Push([]byte(`{"k":"a","v":1,"t":"2026-07-18 10:00:00"}`))
	if err == nil {
		err = q.Push([]byte(`{"k":"a","v":1,"t":"2026-07-18 10:05:00"}`))
	}
	if err == nil {
		err = q.Close()
	}
	if !errors.Is(err, ubik.ErrInternal) || !strings.Contains(err.Error(), "host bug") {
		t.Fatalf("a panicking callback: %v, want ErrInternal naming the panic", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error is %q, want one line", err)
	}
	if !strings.Contains(log.String(), "host bug") || !strings.Contains(log.String(), "goroutine") {
		t.Errorf("the logger got %q, want the panic and its stack", log.String())
	}
}
