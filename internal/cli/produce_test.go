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

// TestProduceCSV: with --format csv a record is sent whole, quoted line
// breaks included and its final line break dropped; --header drops the
// header row and --key-field reads a column named by it, as a CSV source
// reads it (NULL when empty and unquoted, then no key).
func TestProduceCSV(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	in := "id;v\r\n" +
		"a;1\r\n" +
		"\n" +
		"\"b;\"\"x\"\"\ny\";2\n" +
		";3\n" +
		"\"\";4\n" +
		"only one field\n" +
		"c;\"5\r\n6\""
	env, _, errb := runTestEnv(in)
	if code := Main(context.Background(), env, []string{"produce", "--to", "kafka://" + addr + "/csv", "--format", "csv",
		"--header", "--delimiter", ";", "--key-field", "ID"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(errb.String(), "produced 6 records to csv (2 without a \"ID\" field") {
		t.Fatalf("stderr: %s", errb)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("csv"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]*string{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(got) < 6 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("got %v before the timeout", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var k *string
			if r.Key != nil {
				s := string(r.Key)
				k = &s
			}
			got[string(r.Value)] = k
		})
	}
	str := func(s string) *string { return &s }
	want := map[string]*string{
		"a;1": str("a"), "\"b;\"\"x\"\"\ny\";2": str("b;\"x\"\ny"), ";3": nil, "\"\";4": str(""),
		"only one field": nil, "c;\"5\r\n6\"": str("c"),
	}
	for v, k := range want {
		gk, ok := got[v]
		if !ok || (gk == nil) != (k == nil) || gk != nil && *gk != *k {
			t.Errorf("record %q: key %v (present %v), want %v", v, gk, ok, k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d distinct records, want %d: %v", len(got), len(want), got)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "csv", "--key-field", "id"}, "add --header"},
		{[]string{"--header"}, "are for --format csv"},
		{[]string{"--format", "xml"}, `--format "xml"`},
		{[]string{"--format", "csv", "--delimiter", `"`}, "--delimiter"},
		{[]string{"--format", "csv", "--header", "--key-field", "nope"}, `no column "nope"`},
	} {
		env, _, errb := runTestEnv("id,v\n1,2\n")
		if code := Main(context.Background(), env, append([]string{"produce", "--to", "kafka://" + addr + "/csv2"}, bad.args...)); code == 0 || !strings.Contains(errb.String(), bad.want) {
			t.Errorf("produce %v: exit %d, stderr %q; want an error containing %q", bad.args, code, errb, bad.want)
		}
	}
}
