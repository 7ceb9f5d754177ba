package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/scripttest"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/testenv"
)

// TestScripts runs the behaviour tests of testdata/script (the format is
// internal/scripttest's) whose shape runs over Kafka, on the broker of
// scripts/services.sh: each query's inputs produced to topics of one
// partition, the pipeline run until caught up, every query's changelog
// topic read back. A kill is a SIGKILL of the pipeline's process once it
// has committed everything before the kill, then a run that resumes from
// its committed state.
func TestScripts(t *testing.T) {
	t.Parallel()
	addrs := testenv.RequireKafka(t)
	scripttest.Runner{Glob: "../testdata/script/*.txt", Parallel: true}.Run(t, &scriptHost{addrs: addrs})
}

type scriptHost struct{ addrs []string }

func (h *scriptHost) Name() string { return "Kafka" }

// Unordered: a topic keeps each key's records in order, not the order
// of the records of different keys of a join's two inputs.
func (h *scriptHost) Unordered() bool { return true }

func (h *scriptHost) Unobserved(l scripttest.Line) string {
	switch l.Kind {
	case scripttest.Record:
		return ""
	case scripttest.Late, scripttest.EventError:
		return "a Kafka run hands late and rejected events to hooks of the process that read them (a killed process's are gone)"
	case scripttest.Stats, scripttest.JoinStats:
		return "a Kafka run's counters are its process's, and start over in a restarted one"
	case scripttest.Inputs:
		return "a query's inputs are the Go API's Query.Inputs"
	}
	return "a Kafka run's errors are its process's"
}

func (h *scriptHost) Cannot(q *scripttest.Query, c *scripttest.Cmd) string {
	switch c.Name {
	case "sql":
		return scriptCannotRun(q)
	case "watermark":
		return "a Kafka run's watermark comes from its partitions' events"
	case "table-watermark":
		return "a Kafka run's table watermark comes from the table topic's rows"
	case "early", "tick":
		return "a Kafka run emits early on its clock, per transaction"
	case "end-input":
		return "a topic has no end of input: a run ends where its input ended when it started"
	case "input":
		if _, err := scriptQuery(q); err == nil && !scriptDeclares(q, c.Arg) {
			return "a Kafka run reads the inputs its script declares, and " + c.Arg + " is none"
		}
	case "end-table", "table":
		if q.After(c, "push") {
			return "a topic has no end of input, and a run reads two topics in its own order; the script pushes events before table rows"
		}
	case "kill":
		if q.After(c, "close") {
			return "the run has ended: there is nothing to kill"
		}
	}
	if (c.Name == "push" || c.Name == "input" || c.Name == "table") && q.After(c, "close") {
		return "a run ends where its input ended when it started; the script pushes after closing"
	}
	return ""
}

// scriptCannotRun is why query q of a script does not run over Kafka.
func scriptCannotRun(q *scripttest.Query) string {
	pq, err := scriptQuery(q)
	if err != nil {
		return "a SQL error: a Kafka run starts from a compiled query (" + err.Error() + ")"
	}
	if err := CheckQuery(pq); err != nil {
		return "the query does not run over Kafka: " + err.Error()
	}
	for _, c := range q.Cmds {
		if c.Name != "expect" {
			continue
		}
		for _, l := range scripttest.Classify(c.Block) {
			switch {
			case l.Kind == scripttest.Record && strings.Contains(l.Text, "P rev="):
				return "the query publishes provisional records, which a Kafka run takes together per transaction"
			case l.Kind == scripttest.Late:
				return "the query has late events: a Kafka run's aggregating stage moves the watermark by its partitions' markers, not per event, so which events are late depends on its polls"
			}
		}
	}
	return ""
}

// scriptDeclares reports whether the query reads input name.
func scriptDeclares(q *scripttest.Query, name string) bool {
	pq, err := scriptQuery(q)
	if err != nil {
		return false
	}
	first, second := scriptInputs(nil, pq)
	return strings.EqualFold(name, first) || strings.EqualFold(name, second)
}

// scriptQuery compiles the script and picks the query the sql command
// names (the last, the one that reads the others, when it names none).
func scriptQuery(q *scripttest.Query) (*plan.Query, error) {
	prog, err := plan.Compile(q.Text(), plan.CompileOptions{})
	if err != nil {
		return nil, err
	}
	for _, pq := range prog.Queries {
		if strings.EqualFold(pq.Name, q.Name()) {
			return pq, nil
		}
	}
	if q.Name() != "" || len(prog.Queries) == 0 {
		return nil, fmt.Errorf("the script has no query %q", q.Name())
	}
	return prog.Queries[len(prog.Queries)-1], nil
}

func (h *scriptHost) Run(t *testing.T, g *scripttest.Segment) [][]string {
	var out []string
	for _, q := range g.Queries {
		out = append(out, h.runQuery(t, q)...)
	}
	return [][]string{out}
}

// scriptSpec is what a run of one script query needs, in the test and in
// a child process: the script, the query, the topics, the instance.
type scriptSpec struct {
	Brokers []string
	SQL     string
	Name    string
	Prefix  string            // of every name on the shared broker: topics, groups, the query's and its views'
	Topics  map[string]string // input name (the first "", the second "2") or query name -> topic
	Second  string            // "table" (a temporal or interval join's second input) or "join" (a join of two views' second source)
}

func (s *scriptSpec) options(t testing.TB) Options {
	t.Helper()
	pq, err := scriptQuery(&scripttest.Query{SQL: &scripttest.Cmd{Arg: s.Name, Block: strings.Split(s.SQL, "\n")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append(allViews(pq), pq) {
		v.Name = s.Prefix + "_" + v.Name
	}
	e := func(topic string) Endpoint { return endpoint(s.Brokers, topic) }
	o := Options{Query: pq, Source: e(s.Topics[""]), Sink: e(s.Topics[pq.Name]), InstanceID: s.Prefix,
		CommitInterval: 20 * time.Millisecond, ViewSinks: map[string]Endpoint{}}
	for _, v := range allViews(pq) {
		o.ViewSinks[v.Name] = e(s.Topics[v.Name])
	}
	switch s.Second {
	case "table":
		o.Table = e(s.Topics["2"])
	case "join":
		o.JoinSource = e(s.Topics["2"])
	}
	return o
}

// runQuery produces the query's inputs and runs it: in this process to
// the end, or, with a kill, first in a child process killed once it has
// committed every input before the kill.
func (h *scriptHost) runQuery(t *testing.T, q *scripttest.Query) []string {
	pq, err := scriptQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptSpec{Brokers: h.addrs, SQL: q.Text(), Name: q.Name(), Prefix: uniq("scr"), Topics: map[string]string{}}
	first, second := scriptInputs(t, pq)
	s.Topics[""], s.Topics["2"] = s.Prefix+"-in", s.Prefix+"-in2"
	mkTopic(t, h.addrs, s.Topics[""], 1, nil)
	if second != "" {
		mkTopic(t, h.addrs, s.Topics["2"], 1, nil)
		s.Second = "table"
		if viewJoinBelow(pq) != nil {
			s.Second = "join"
		}
	}
	for _, v := range append(allViews(pq), pq) {
		s.Topics[s.Prefix+"_"+v.Name] = s.Prefix + "-out-" + v.Name
	}
	at := 0
	for _, c := range q.Cmds {
		if c.Name == "kill" {
			h.produce(t, s, q, first, at, c.Line)
			h.killRun(t, s)
			at = c.Line
		}
	}
	h.produce(t, s, q, first, at, 1<<30)
	o := s.options(t)
	o.Logger = testLogger(t)
	runToEnd(t, o, 2*time.Minute)
	return h.records(t, s, pq)
}

// allViews are the views q reads, directly or through others, each once,
// upstream first.
func allViews(q *plan.Query) []*plan.Query {
	var out []*plan.Query
	for _, v := range q.Views() {
		for _, u := range append(allViews(v), v) {
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

// scriptInputs are the query's inputs: the first one's name and the
// second's ("" without one).
func scriptInputs(t *testing.T, pq *plan.Query) (first, second string) {
	switch {
	case len(pq.Views()) > 0:
		g, err := drive.NewGraph(pq, nil, drive.Config{Emit: func(*changelog.Record) error { return nil }},
			func(*changelog.Record) error { return nil }, func(string, *drive.LateEvent) {})
		if err != nil {
			return "", ""
		}
		return g.Sources()[0].Name, g.SecondInput()
	case pq.Join != nil:
		return pq.Join.Stream.Name, pq.Join.Table.Name
	case pq.IJoin != nil:
		return pq.IJoin.Left.Name, pq.IJoin.Right.Name
	}
	return pq.Source.Name, ""
}

// produce writes the rows of the commands between lines from and to to
// their topics.
func (h *scriptHost) produce(t *testing.T, s *scriptSpec, q *scripttest.Query, first string, from, to int) {
	var rows [2][][]byte
	for _, c := range q.Cmds {
		if c.Line <= from || c.Line >= to {
			continue
		}
		i := 1
		switch {
		case c.Name == "push", c.Name == "input" && strings.EqualFold(c.Arg, first):
			i = 0
		case c.Name != "input" && c.Name != "table":
			continue
		}
		for _, l := range c.Block {
			rows[i] = append(rows[i], []byte(l))
		}
	}
	for i, topic := range []string{s.Topics[""], s.Topics["2"]} {
		if len(rows[i]) > 0 {
			produceValues(t, h.addrs, topic, 1, rows[i], nil)
		}
	}
}

// records reads every query's topic, its view records prefixed with the
// view's name as the script prints them.
func (h *scriptHost) records(t *testing.T, s *scriptSpec, pq *plan.Query) []string {
	var out []string
	for _, v := range append(allViews(pq), pq) {
		view := v.Name
		if v == pq {
			view = ""
		}
		for _, r := range readTopic(t, h.addrs, s.Topics[s.Prefix+"_"+v.Name]) {
			out = append(out, scripttest.RecordLine(view, r.Meta.Final, r.Meta.Revision, string(r.Key), string(r.Value)))
		}
	}
	return out
}

// readTopic reads a changelog topic to its end with read_committed: to
// its last transaction (whose commit marker is its last offset), or, after
// an aborted one, until no record comes for a while.
func readTopic(t *testing.T, addrs []string, topic string) []changelog.Record {
	ends, err := kadm.NewClient(client(t, addrs)).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatalf("%s: %v", topic, err)
	}
	end, _ := ends.Lookup(topic, 0)
	if end.Offset == 0 {
		return nil
	}
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []changelog.Record
	last := int64(-1)
	quiet := time.Now().Add(30 * time.Second) // until the first record: slow on a loaded broker
	for last < end.Offset-2 && time.Now().Before(quiet) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			kr, err := changelog.DecodeHeaders(r.Key, r.Value, r.Headers)
			if err != nil {
				t.Fatalf("%s: %v", topic, err)
			}
			out, last = append(out, kr), r.Offset
			quiet = time.Now().Add(2 * time.Second)
		})
	}
	return out
}

// envScriptChild makes the test binary a child running a script query's
// pipeline (TestScripts kills it): the file of its scriptSpec.
const envScriptChild = "UBIK_KAFKA_SCRIPT_CHILD"

func init() {
	path := os.Getenv(envScriptChild)
	if path == "" {
		return
	}
	b, err := os.ReadFile(path)
	var s scriptSpec
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err == nil {
		var pl *Pipeline
		if pl, err = New(s.options(childTB{})); err == nil {
			err = pl.Run(context.Background())
		}
	}
	fmt.Fprintln(os.Stderr, "script child:", err)
	os.Exit(1)
}

// childTB is the testing.TB of a child process: a failure ends it.
type childTB struct{ testing.TB }

func (childTB) Helper() {}
func (childTB) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(1)
}

// killRun runs the query in a child process until it has committed every
// input produced so far, then kills it with SIGKILL.
func (h *scriptHost) killRun(t *testing.T, s *scriptSpec) {
	spec := filepath.Join(t.TempDir(), "spec.json")
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p := crashtest.Start(t, crashtest.Self(envScriptChild+"="+spec))
	waitCommitted(t, h.addrs, s, p)
	killChild(t, p)
}

// waitCommitted waits until every consumer group of the run (its names
// start with prefix) has committed its input to the end. The stages keep
// writing watermark markers (one a second, idle or not), so the internal
// topics never stand still: it waits in rounds instead, each until every
// group has committed what its topic held when the round began (the
// inputs: their end), as many rounds as there are groups, so a row
// derived from the input through every stage has been taken by the last.
func waitCommitted(t *testing.T, addrs []string, s *scriptSpec, p *crashtest.Proc) {
	prefix := s.Prefix
	adm := kadm.NewClient(client(t, addrs))
	inputs := []string{s.Topics[""], s.Topics["2"]}
	var target map[string]map[int32]int64 // the round's ends; nil: the inputs' only
	var seen []string                     // the groups of the rounds so far
	rounds := 0
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.Done():
			t.Fatalf("the run before the kill ended by itself:\n%s", p.Stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run before the kill did not commit its input within a minute (round %d; %s):\n%s", rounds, lagsOf(adm, prefix), p.Stderr())
		}
		groups := groupsOf(adm, prefix)
		if len(groups) == 0 {
			continue
		}
		if slices.Sort(groups); !slices.Equal(groups, seen) {
			// A stage's group appeared: the rounds start over.
			seen, target, rounds = groups, nil, 0
		}
		lags, err := adm.Lag(context.Background(), groups...)
		if err != nil || !reached(lags, target, inputs) {
			continue
		}
		if rounds++; rounds > len(groups) {
			return
		}
		target = endsOf(lags)
	}
}

// groupsOf lists the consumer groups whose names start with prefix.
func groupsOf(adm *kadm.Client, prefix string) []string {
	listed, err := adm.ListGroups(context.Background())
	if err != nil {
		return nil
	}
	var groups []string
	for _, g := range listed.Groups() {
		if strings.HasPrefix(g, prefix) {
			groups = append(groups, g)
		}
	}
	return groups
}

// reached reports whether every partition the groups consume is
// committed: an input to its end, an internal topic (written in
// transactions) up to the marker that ends target's last transaction, or
// anywhere when target has none of it.
func reached(lags kadm.DescribedGroupLags, target map[string]map[int32]int64, inputs []string) bool {
	ok := true
	lags.Each(func(l kadm.DescribedGroupLag) {
		if l.Error() != nil || len(l.Lag) == 0 {
			ok = false
		}
		for _, p := range l.Lag.Sorted() {
			switch end, known := target[p.Topic][p.Partition]; {
			case p.Commit.At < 0 || p.Lag < 0:
				ok = false
			case slices.Contains(inputs, p.Topic):
				ok = ok && p.Lag == 0
			case known:
				ok = ok && p.Commit.At >= end-1
			}
		}
	})
	return ok
}

// endsOf is the end offset of every partition the groups consume.
func endsOf(lags kadm.DescribedGroupLags) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	lags.Each(func(l kadm.DescribedGroupLag) {
		for _, p := range l.Lag.Sorted() {
			if out[p.Topic] == nil {
				out[p.Topic] = map[int32]int64{}
			}
			out[p.Topic][p.Partition] = p.End.Offset
		}
	})
	return out
}

// lagsOf describes the lags of the groups named prefix*, for a failure.
func lagsOf(adm *kadm.Client, prefix string) string {
	listed, err := adm.ListGroups(context.Background())
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, g := range listed.Groups() {
		if !strings.HasPrefix(g, prefix) {
			continue
		}
		lags, err := adm.Lag(context.Background(), g)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v; ", g, err)
			continue
		}
		lags.Each(func(l kadm.DescribedGroupLag) {
			for _, p := range l.Lag.Sorted() {
				fmt.Fprintf(&b, "%s %s/%d: commit %d, end %d, lag %d; ", g, p.Topic, p.Partition, p.Commit.At, p.End.Offset, p.Lag)
			}
		})
	}
	return b.String()
}
