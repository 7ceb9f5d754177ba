package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProduce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	in := "{\"id\":\"a\",\"v\":1}\n\n{\"id\":7,\"v\":2}\r\nnot json\n"
	env, _, errb := runTestEnv(in)
	if code := Main(context.Background(), env, []string{"produce", "--to", "kafka://" + addr + "/ev", "--partitions", "3", "--key-field", "id"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(errb.String(), "produced 3 records to ev (1 without a \"id\" field") {
		t.Fatalf("stderr: %s", errb)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("ev"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(got) < 3 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("got %v before the timeout", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = string(r.Key) })
	}
	want := map[string]string{`{"id":"a","v":1}`: "a", `{"id":7,"v":2}`: "7", "not json": ""}
	for v, k := range want {
		if gk, ok := got[v]; !ok || gk != k {
			t.Errorf("record %q: key %q (present %v), want %q", v, gk, ok, k)
		}
	}
}
