package cli

import (
	"context"
	"fmt"
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
	if !strings.Contains(errb.String(), "produced 3 records to ev (1 not readable for a \"id\" key") {
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

// TestProduceKeyIsTheGroupText: --key-field keys a line by the text a
// query's VARCHAR column holds, so a topic keyed by g is partitioned by the
// group a query grouping by g computes: escapes resolved, invalid UTF-8
// repaired (two different invalid bytes are one group, one key), and a
// line the engine reads (non-finite number spellings in other fields)
// keeps its key; a number or an object keys by its canonical JSON text,
// JSON null and a line without the field (both the NULL group) as "null";
// only a line that is not JSON goes without a key.
func TestProduceKeyIsTheGroupText(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	lines := []string{
		`{"g":"Bo\u00e9","x":1}`, `{"g":"Bo\u00E9","x":-NaN}`, "{\"g\":\"Bo\xc3\xa9\",\"x\":+Infinity}",
		"{\"g\":\"\xff\",\"x\":Infinity}", "{\"g\":\"\xfe\",\"x\":-inf}", `{"g":null,"x":1e400}`, `{"x":nan}`, `{"g":12,"x":-NaN}`, `{"g":{ "a" : 1 }}`, "not json",
	}
	env, _, errb := runTestEnv(strings.Join(lines, "\n") + "\n")
	if code := Main(context.Background(), env, []string{"produce", "--to", "kafka://" + addr + "/ev", "--partitions", "3", "--key-field", "g"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(errb.String(), "produced 10 records to ev (1 not readable for a \"g\" key") {
		t.Fatalf("stderr: %s", errb)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("ev"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type kp struct {
		key  *string
		part int32
	}
	got := map[string]kp{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(got) < len(lines) {
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
			got[string(r.Value)] = kp{k, r.Partition}
		})
	}
	wantKey := []string{"Boé", "Boé", "Boé", "\ufffd", "\ufffd", "null", "null", "12", `{"a":1}`, ""}
	for i, l := range lines {
		g := got[l]
		switch {
		case wantKey[i] == "" && g.key != nil:
			t.Errorf("line %q: key %q, want none", l, *g.key)
		case wantKey[i] != "" && (g.key == nil || *g.key != wantKey[i]):
			t.Errorf("line %q: key %v, want %q", l, g.key, wantKey[i])
		}
	}
	for _, same := range [][2]int{{0, 1}, {0, 2}, {3, 4}} {
		if a, b := got[lines[same[0]]].part, got[lines[same[1]]].part; a != b {
			t.Errorf("lines %q and %q (one group) went to partitions %d and %d", lines[same[0]], lines[same[1]], a, b)
		}
	}
}

// TestProduceCSV: with --format csv a record is sent whole, quoted line
// breaks included and its final line break dropped; --header drops the
// header row and --key-field reads a column named by it, as a CSV source
// reads it (NULL when empty and unquoted, keyed "null" as the NULL group;
// a record that does not fit the header goes without a key).
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
	if !strings.Contains(errb.String(), "produced 6 records to csv (1 not readable for a \"ID\" key") {
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
		"a;1": str("a"), "\"b;\"\"x\"\"\ny\";2": str("b;\"x\"\ny"), ";3": str("null"), "\"\";4": str(""),
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

// TestProduceSpreads: without --key-field the records of one call go
// round-robin over every partition (a small call fills them all); with
// it, a key's records share one partition, the one Kafka's default
// partitioner (murmur2, a Java producer's) picks, and records without
// the field are spread.
func TestProduceSpreads(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	read := func(topic string, n int) map[int32][]*kgo.Record {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		out := map[int32][]*kgo.Record{}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for got := 0; got < n; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records of %s", got, n, topic)
			}
			fs.EachRecord(func(r *kgo.Record) { out[r.Partition] = append(out[r.Partition], r); got++ })
		}
		return out
	}

	var in strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&in, "{\"id\":\"k%d\",\"v\":%d}\n", i%3, i)
	}
	env, _, errb := runTestEnv(in.String())
	if code := Main(context.Background(), env, []string{"produce", "--to", "kafka://" + addr + "/rr", "--partitions", "4"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(errb.String(), "produced 10 records to rr; per partition 0: 3, 1: 3, 2: 2, 3: 2") {
		t.Errorf("stderr: %s", errb)
	}
	for p, recs := range read("rr", 10) {
		if want := map[int32]int{0: 3, 1: 3, 2: 2, 3: 2}[p]; len(recs) != want {
			t.Errorf("unkeyed: partition %d holds %d records, want %d (round-robin)", p, len(recs), want)
		}
	}

	in.WriteString("{\"v\":10}\n{\"v\":11}\n{\"v\":12}\n{\"v\":13}\n")
	env, _, errb = runTestEnv(in.String())
	if code := Main(context.Background(), env, []string{"produce", "--to", "kafka://" + addr + "/keyed", "--partitions", "4", "--key-field", "id"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	keyPart := map[string]int32{}
	keyless := map[int32]int{}
	for p, recs := range read("keyed", 14) {
		for _, r := range recs {
			if r.Key == nil {
				keyless[p]++
				continue
			}
			if q, ok := keyPart[string(r.Key)]; ok && q != p {
				t.Errorf("key %s on partitions %d and %d", r.Key, q, p)
			}
			keyPart[string(r.Key)] = p
			// Kafka's default partitioner: murmur2 of the key, positive, mod n.
			if want := int32(murmur2(r.Key)&0x7fffffff) % 4; p != want {
				t.Errorf("key %s on partition %d, want %d (murmur2)", r.Key, p, want)
			}
		}
	}
	// A line without the field is the NULL group, keyed "null": one
	// partition, as for every other group.
	if len(keyless) != 0 {
		t.Errorf("records without a key: %v by partition, want none (a missing field keys as \"null\")", keyless)
	}
	if _, ok := keyPart["null"]; !ok {
		t.Errorf("no record keyed \"null\" (the lines without the field)")
	}
}

// murmur2 is Kafka's (org.apache.kafka.common.utils.Utils.murmur2).
func murmur2(b []byte) uint32 {
	const seed, m, r = 0x9747b28c, 0x5bd1e995, 24
	h := uint32(seed) ^ uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
